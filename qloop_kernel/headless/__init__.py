"""Running notebooks without a person: ``qloop run`` / ``show``, the runner and the kernel spec."""
