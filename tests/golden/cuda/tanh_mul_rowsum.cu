extern "C" __global__ void __launch_bounds__(256) y_7a78b6669c5d41f2(const float* __restrict__ p0, const float* __restrict__ p1, float* __restrict__ p2, float* __restrict__ p3) {
  __shared__ float s0[8];
  for (int kk = blockIdx.x; kk < 4; kk += gridDim.x) {
    const int k0 = kk;
    const int b0 = 0;
    const int b1 = k0 * 8;
    const int b2 = k0 * 8;
    const int b3 = k0;
    float a0 = 0.0f;
    for (int rr = (int)blockIdx.y * 256 + threadIdx.x; rr < 8; rr += 256) {
      const int r1 = rr;
      const float v0 = p0[b0 + r1];
      const float v1 = p1[b1 + r1];
      const float v2 = tanhf(v1);
      const float v3 = (v2 * v0);
      p2[b2 + r1] = v3;
      a0 = y_op_sum()(a0, (float)v3);
    }
    a0 = y_block_reduce<256>(a0, (float)0.0f, y_op_sum(), s0);
    if (threadIdx.x == 0) p3[b3] = a0;
  }
}
