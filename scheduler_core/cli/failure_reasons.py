"""Why a file could not be read or a server not reached, in schedlens's words, for what the CLI prints.

The operating system's and the TLS library's sentences (``[Errno 111] Connection refused``, ``[SSL:
CERTIFICATE_VERIFY_FAILED] ...``) differ between platforms and releases; the user gets a short reason of ours chosen
by the exception's class and errno, which are structured and stable.
"""

from __future__ import annotations

import errno
import socket
import ssl

_FILE_REASONS = {
    errno.ENOENT: "it does not exist",
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EISDIR: "it is a directory",
    errno.ENOTDIR: "a part of its path is not a directory",
    errno.ELOOP: "its symbolic links loop",
}


def file_failure(exc: OSError | UnicodeDecodeError) -> str:
    """Why a file could not be read (``exc`` from opening or reading it)."""
    if isinstance(exc, UnicodeDecodeError):
        return f"it is not UTF-8 text (byte {exc.start})"
    return _FILE_REASONS.get(exc.errno or 0) or _errno_name(exc)


def connection_failure(reason: object, timeout: float) -> str:
    """Why a server could not be reached; ``reason``: the exception (or ``URLError.reason``) the attempt raised."""
    if isinstance(reason, ssl.SSLCertVerificationError):
        return "its TLS certificate cannot be verified"
    if isinstance(reason, ssl.SSLError):
        return "the TLS handshake failed"
    if isinstance(reason, TimeoutError):
        return f"no answer within {timeout:g} s"
    if isinstance(reason, socket.gaierror):
        return "its host name does not resolve"
    if isinstance(reason, ConnectionRefusedError):
        return "the connection was refused"
    if isinstance(reason, ConnectionError):
        return "the connection was closed"
    if isinstance(reason, OSError):
        return f"the connection failed ({_errno_name(reason)})"
    return "the connection failed"


def _errno_name(exc: OSError) -> str:
    return errno.errorcode.get(exc.errno or 0) or type(exc).__name__
