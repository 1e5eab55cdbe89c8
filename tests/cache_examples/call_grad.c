/* Calls model_grad from libmodel_grad.so (built by yota.aot) from C.
 *
 *   call_grad DIR N_W N_B N_X N_LABELS
 *
 * reads DIR/in0.bin .. in3.bin (p.W, p.b, X as float64, labels as int64, raw
 * row-major), calls model_grad and model_grad_ws, checks that both agree, and writes
 * DIR/out0.bin .. out3.bin (value, grad p.W, grad p.b, grad X as float64).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model_grad.h"

static void *read_file(const char *dir, const char *name, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    void *data = malloc(bytes ? bytes : 1);
    if (!f || fread(data, 1, bytes, f) != bytes) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(2);
    }
    fclose(f);
    return data;
}

static void write_file(const char *dir, const char *name, const void *data, size_t bytes) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(data, 1, bytes, f) != bytes) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

int main(int argc, char **argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s DIR N_W N_B N_X N_LABELS\n", argv[0]);
        return 2;
    }
    const char *dir = argv[1];
    size_t nw = strtoul(argv[2], 0, 10), nb = strtoul(argv[3], 0, 10);
    size_t nx = strtoul(argv[4], 0, 10), nl = strtoul(argv[5], 0, 10);
    double *w = read_file(dir, "in0.bin", nw * sizeof(double));
    double *b = read_file(dir, "in1.bin", nb * sizeof(double));
    double *x = read_file(dir, "in2.bin", nx * sizeof(double));
    int64_t *labels = read_file(dir, "in3.bin", nl * sizeof(int64_t));

    double value, value2;
    double *gw = malloc(nw * sizeof(double)), *gb = malloc(nb * sizeof(double));
    double *gx = malloc(nx * sizeof(double));
    int rc = model_grad(w, b, x, labels, &value, gw, gb, gx);
    if (rc) {
        fprintf(stderr, "model_grad returned %d\n", rc);
        return 1;
    }

    /* the same with a caller-provided workspace */
    void *ws = aligned_alloc(64, model_grad_workspace_bytes());
    double *gw2 = malloc(nw * sizeof(double)), *gb2 = malloc(nb * sizeof(double));
    double *gx2 = malloc(nx * sizeof(double));
    rc = model_grad_ws(w, b, x, labels, &value2, gw2, gb2, gx2, ws);
    if (rc || value != value2 || memcmp(gw, gw2, nw * sizeof(double))
            || memcmp(gx, gx2, nx * sizeof(double))) {
        fprintf(stderr, "model_grad_ws disagrees (rc %d)\n", rc);
        return 1;
    }
    if (model_grad_workspace_bytes() != MODEL_GRAD_WORKSPACE_BYTES) return 1;

    write_file(dir, "out0.bin", &value, sizeof value);
    write_file(dir, "out1.bin", gw, nw * sizeof(double));
    write_file(dir, "out2.bin", gb, nb * sizeof(double));
    write_file(dir, "out3.bin", gx, nx * sizeof(double));
    printf("ok %.17g\n", value);
    return 0;
}
