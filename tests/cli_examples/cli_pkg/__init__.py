"""A package, for `yota-ir tape cli_pkg.losses:FUNC` targets."""
