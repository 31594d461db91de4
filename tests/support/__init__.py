"""Every helper the tests share: fakes of the systems around schedlens, servers and processes to run, and the
inputs and records tests build. Conftest files hold only fixtures; benchmarks may import from here, never from tests."""
