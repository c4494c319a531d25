"""exporter-toolkit's TLS server settings where Python's ``ssl`` names them otherwise or lacks
them: Go's cipher suite and curve names, the curve list (OpenSSL's groups list, set through
ctypes as the client-certificate callback is), and ``client_allowed_sans``, checked on the
client certificate once the handshake is done.

Go's meanings, as exporter-toolkit's ``web/tls_config.go`` gives them: ``cipher_suites`` takes
the names of Go's ``tls.CipherSuites()`` (the insecure ones are refused) and applies to TLS 1.2
only, since Go does not let TLS 1.3 suites be configured (their names are accepted and
ignored, so are they here); ``curve_preferences`` applies to every version; a client
certificate with none of ``client_allowed_sans`` (DNS names, e-mail addresses, IP addresses,
URIs, compared exactly) ends the connection.
"""

from __future__ import annotations

import ctypes
import datetime
import ipaddress
import ssl
from collections.abc import Sequence

from exporter.errors import TlsSettingError

#: Go's secure TLS 1.0-1.2 cipher suites (``tls.CipherSuites()``) and OpenSSL's names for them.
GO_CIPHER_SUITES = {
    "TLS_RSA_WITH_AES_128_CBC_SHA": "AES128-SHA",
    "TLS_RSA_WITH_AES_256_CBC_SHA": "AES256-SHA",
    "TLS_RSA_WITH_AES_128_GCM_SHA256": "AES128-GCM-SHA256",
    "TLS_RSA_WITH_AES_256_GCM_SHA384": "AES256-GCM-SHA384",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA": "ECDHE-ECDSA-AES128-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_256_CBC_SHA": "ECDHE-ECDSA-AES256-SHA",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA": "ECDHE-RSA-AES128-SHA",
    "TLS_ECDHE_RSA_WITH_AES_256_CBC_SHA": "ECDHE-RSA-AES256-SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256": "ECDHE-ECDSA-AES128-GCM-SHA256",
    "TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384": "ECDHE-ECDSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256": "ECDHE-RSA-AES128-GCM-SHA256",
    "TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384": "ECDHE-RSA-AES256-GCM-SHA384",
    "TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-RSA-CHACHA20-POLY1305",
    "TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256": "ECDHE-ECDSA-CHACHA20-POLY1305",
}
#: Go's TLS 1.3 suites: accepted in ``cipher_suites`` and, as in Go, not configurable.
TLS13_CIPHER_SUITES = (
    "TLS_AES_128_GCM_SHA256",
    "TLS_AES_256_GCM_SHA384",
    "TLS_CHACHA20_POLY1305_SHA256",
)
#: Go's ``tls.InsecureCipherSuites()``: exporter-toolkit refuses them, so do we (saying why).
INSECURE_CIPHER_SUITES = (
    "TLS_RSA_WITH_RC4_128_SHA",
    "TLS_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_RSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_ECDSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_RC4_128_SHA",
    "TLS_ECDHE_RSA_WITH_3DES_EDE_CBC_SHA",
    "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA256",
    "TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA256",
)
#: exporter-toolkit's curve names and OpenSSL's group names for them.
GO_CURVES = {"CurveP256": "P-256", "CurveP384": "P-384", "CurveP521": "P-521", "X25519": "X25519"}

_SSL_CTRL_SET_GROUPS_LIST = 92  # SSL_CTX_set1_groups_list() is this SSL_CTX_ctrl() call
_VERIFY_MODES = {ssl.CERT_NONE: 0, ssl.CERT_OPTIONAL: 1, ssl.CERT_REQUIRED: 3}
_VERIFY_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)
_ACCEPT_ANY = _VERIFY_CALLBACK(lambda preverified, store: 1)  # kept alive for the process


class ServerContext(ssl.SSLContext):
    """A server TLS context that also carries ``client_allowed_sans``, so a connection is
    checked against the settings it was made with, whatever a reload changed since."""

    allowed_sans: frozenset[str] = frozenset()


def _ssl_ctx(context: ssl.SSLContext) -> tuple[ctypes.CDLL, int]:
    """The libssl that ``ssl`` uses and the context's ``SSL_CTX *``, checked to be this
    context's (its options and verify mode as OpenSSL reports them) before anything uses it."""
    try:
        library = ctypes.CDLL(ssl._ssl.__file__)  # type: ignore[attr-defined]  # links libssl
        get_options = library.SSL_CTX_get_options
        get_mode = library.SSL_CTX_get_verify_mode
    except (AttributeError, OSError) as error:  # _ssl built in, or no such symbol
        raise ssl.SSLError(f"OpenSSL's functions are not reachable here ({error})") from None
    get_options.argtypes, get_options.restype = [ctypes.c_void_p], ctypes.c_uint64
    get_mode.argtypes, get_mode.restype = [ctypes.c_void_p], ctypes.c_int
    # CPython's SSLContext object starts with the SSL_CTX pointer, right after its header.
    pointer = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    mode = _VERIFY_MODES[context.verify_mode]
    if not pointer or get_options(pointer) != context.options or get_mode(pointer) != mode:
        raise ssl.SSLError("this Python's ssl module does not hold its SSL_CTX where expected")
    return library, pointer


def accept_unverified_client_certificates(context: ssl.SSLContext) -> None:
    """Keep asking for (or requiring) a client certificate but accept it unverified, as Go's
    RequestClientCert/RequireAnyClientCert do. Python's ssl has no verify callback, so this
    sets OpenSSL's on the context."""
    try:
        library, pointer = _ssl_ctx(context)
    except ssl.SSLError as error:
        raise TlsSettingError("client_auth_type", f"cannot accept unverified: {error}") from None
    set_verify = library.SSL_CTX_set_verify
    set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VERIFY_CALLBACK]
    set_verify.restype = None
    set_verify(pointer, _VERIFY_MODES[context.verify_mode], _ACCEPT_ANY)


def set_cipher_suites(context: ssl.SSLContext, go_names: Sequence[str]) -> None:
    """The TLS 1.2 cipher suites, in ``go_names``' order (TLS 1.3 names left out, as Go does)."""
    openssl = [GO_CIPHER_SUITES[name] for name in go_names if name in GO_CIPHER_SUITES]
    if not openssl:  # only TLS 1.3 suites: no TLS 1.2 suite is allowed, so no TLS 1.2
        context.minimum_version = ssl.TLSVersion.TLSv1_3
        return
    try:
        context.set_ciphers(":".join(openssl))
    except ssl.SSLError as error:
        raise TlsSettingError("cipher_suites", f"OpenSSL refuses them: {error}") from None


def set_curves(context: ssl.SSLContext, go_names: Sequence[str]) -> None:
    """The key exchange groups, in ``go_names``' order (``SSL_CTX_set1_groups_list``: Python's
    ``set_ecdh_curve`` takes one curve only)."""
    groups = ":".join(GO_CURVES[name] for name in go_names).encode()
    try:
        library, pointer = _ssl_ctx(context)
    except ssl.SSLError as error:
        raise TlsSettingError("curve_preferences", f"cannot be applied: {error}") from None
    control = library.SSL_CTX_ctrl
    control.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_long, ctypes.c_char_p]
    control.restype = ctypes.c_long
    if control(pointer, _SSL_CTRL_SET_GROUPS_LIST, 0, groups) != 1:
        raise TlsSettingError("curve_preferences", f"OpenSSL refuses the groups {groups.decode()}")


def peer_refusal(sock: ssl.SSLSocket) -> str | None:
    """Why a client whose handshake is done may not go on: its certificate has none of the
    ``client_allowed_sans`` of the context it connected with (or it sent none); None when it
    may, or when no such list is set."""
    context = sock.context
    if not isinstance(context, ServerContext) or not context.allowed_sans:
        return None
    der = sock.getpeercert(binary_form=True)
    if not der:
        return "no client certificate, and client_allowed_sans is set"
    try:
        names = certificate_sans(der)
    except ValueError as error:
        return f"the client certificate's SANs cannot be read ({error})"
    if names & context.allowed_sans:
        return None
    shown = ", ".join(sorted(names)[:8]) or "none"
    return f"no SAN of the client certificate is in client_allowed_sans (it has: {shown})"


_SAN_OID = bytes.fromhex("0603551d11")  # OBJECT IDENTIFIER 2.5.29.17, subjectAltName
_SEQUENCE, _EXPLICIT_3, _OCTETS = 0x30, 0xA3, 0x04
_EMAIL, _DNS, _URI, _IP = 0x81, 0x82, 0x86, 0x87  # GeneralName's [1], [2], [6], [7]


def certificate_sans(der: bytes) -> set[str]:
    """The DNS names, e-mail addresses, URIs and IP addresses (as Go prints them) of the
    subjectAltName extension of a DER certificate; ValueError when it is not well formed."""
    try:
        certificate = _children(der, 0, len(der), _SEQUENCE)[0]
        tbs = _children(der, *certificate[1:])[0]  # then the signature's algorithm and value
        if tbs[0] != _SEQUENCE:
            raise ValueError("no TBSCertificate")
        for tag, start, end in _children(der, *tbs[1:]):
            if tag != _EXPLICIT_3:
                continue
            extensions = _children(der, start, end, _SEQUENCE)[0]
            for _, ext_start, ext_end in _children(der, *extensions[1:], _SEQUENCE):
                if der[ext_start : ext_start + len(_SAN_OID)] == _SAN_OID:
                    return _general_names(der, ext_start, ext_end)
    except IndexError:
        raise ValueError("truncated") from None
    return set()


_UTC_TIME, _GENERALIZED_TIME = 0x17, 0x18


def certificate_not_after(der: bytes) -> datetime.datetime:
    """The notAfter of a DER certificate (UTC); ValueError when it is not well formed."""
    try:
        certificate = _children(der, 0, len(der), _SEQUENCE)[0]
        fields = _children(der, *certificate[1:])[0]
        parts = _children(der, *fields[1:])
        if parts[0][0] == 0xA0:  # [0] version, absent for v1
            parts = parts[1:]
        validity = parts[3]  # after the serial number, signature algorithm and issuer
        if validity[0] != _SEQUENCE:
            raise ValueError("no validity")
        tag, start, end = _children(der, *validity[1:])[1]
    except IndexError:
        raise ValueError("truncated") from None
    text = der[start:end].decode("ascii", errors="replace")
    if tag == _UTC_TIME:  # YYMMDDHHMMSSZ: 50-99 are 19xx (RFC 5280, 4.1.2.5.1)
        text = ("19" if int(text[:2]) >= 50 else "20") + text
    elif tag != _GENERALIZED_TIME:
        raise ValueError("a time of an unknown type")
    when = datetime.datetime.strptime(text, "%Y%m%d%H%M%SZ")
    return when.replace(tzinfo=datetime.UTC)


def _general_names(der: bytes, start: int, end: int) -> set[str]:
    """The names of one Extension (OID, optional critical flag, OCTET STRING of names)."""
    value = next((part for part in _children(der, start, end) if part[0] == _OCTETS), None)
    if value is None:
        raise ValueError("an extension without a value")
    names_seq = _children(der, *value[1:], _SEQUENCE)[0]
    names: set[str] = set()
    for tag, name_start, name_end in _children(der, *names_seq[1:]):
        raw = der[name_start:name_end]
        if tag in (_EMAIL, _DNS, _URI):
            names.add(raw.decode("ascii", errors="replace"))
        elif tag == _IP and len(raw) in (4, 16):
            address = ipaddress.ip_address(raw)
            mapped = getattr(address, "ipv4_mapped", None)
            names.add(str(mapped or address))
    return names


def _children(
    der: bytes, start: int, end: int, only: int | None = None
) -> list[tuple[int, int, int]]:
    """The (tag, value start, value end) of each DER element from ``start`` to ``end``; with
    ``only``, every one must have that tag."""
    found: list[tuple[int, int, int]] = []
    at = start
    while at < end:
        tag, length = der[at], der[at + 1]
        at += 2
        if tag & 0x1F == 0x1F:
            raise ValueError("a multi-byte tag")
        if length & 0x80:
            count = length & 0x7F
            if not 1 <= count <= 4:
                raise ValueError("a length of more than four bytes")
            length = int.from_bytes(der[at : at + count], "big")
            at += count
        if at + length > end or (only is not None and tag != only):
            raise ValueError("an element out of place")
        found.append((tag, at, at + length))
        at += length
    if not found:
        raise ValueError("an empty element")
    return found
