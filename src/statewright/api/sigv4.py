"""Signature Version 4, checked: the request recomputed as it was received, and signed again with the caller's key.

The canonical request, the string to sign and the signature are botocore's own (``SigV4Auth``), given the headers
the caller says it signed, the path and query as they arrived and the body's SHA-256. What is checked before, in
the order AWS reports it: the Authorization header's parts, the credential scope (service ``states``, a region, the
terminator), the key (an accounts file's key; a temporary key with its session token, unexpired; a region its
account may use), the time (within five minutes of this server's clock, and the scope's date the request's), the
body's hash when the client sent one. Each failure is AWS's error for it; nothing is remembered per request, so a
flood of unknown keys or replays costs no memory.
"""

from __future__ import annotations

import datetime
import email.utils
import hashlib
import hmac
from dataclasses import dataclass

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import ReadOnlyCredentials

from .accounts import Accounts, Key
from .arns import REGION_NAME
from .errors import AwsError

SERVICE = "states"
ALGORITHM = "AWS4-HMAC-SHA256"
SKEW_S = 300  # how far a request's time may be from this server's, either way (AWS: five minutes)
_AMZ_DATE = "%Y%m%dT%H%M%SZ"


@dataclass(frozen=True, slots=True)
class Caller:
    """Who signed a request, and for which region."""

    key: Key
    region: str

    @property
    def account_id(self) -> str:
        return self.key.account.account_id


def missing_token() -> AwsError:
    return AwsError("MissingAuthenticationTokenException", "Missing Authentication Token")


def _incomplete(message: str) -> AwsError:
    return AwsError("IncompleteSignatureException", message)


def _invalid(message: str) -> AwsError:
    return AwsError("InvalidSignatureException", message)


def _unrecognized() -> AwsError:
    return AwsError("UnrecognizedClientException", "The security token included in the request is invalid.")


def verify(accounts: Accounts, method: str, raw_path: bytes, query: bytes, headers: list[tuple[bytes, bytes]],
           body: bytes, now_s: float) -> Caller:
    """The caller of a request signed with SigV4 in its Authorization header, or the AwsError AWS answers."""
    fields: dict[str, list[str]] = {}
    for name, value in headers:
        fields.setdefault(name.decode("latin-1").lower(), []).append(value.decode("latin-1"))
    authorization = fields.get("authorization")
    if not authorization:
        raise missing_token()
    header = authorization[0]
    algorithm, _, rest = header.partition(" ")
    if algorithm != ALGORITHM:
        raise _incomplete(f"Authorization header requires the algorithm {ALGORITHM}; got "
                          f"'{algorithm[:64]}'. Authorization={header[:256]}")
    parts = {}
    for part in rest.split(","):
        name, equals, value = part.strip().partition("=")
        if equals:
            parts[name] = value
    problems = [f"Authorization header requires '{name}' parameter." for name in ("Credential", "Signature",
                                                                                 "SignedHeaders")
                if not parts.get(name)]
    amz_date = _request_time(fields)
    if amz_date is None:
        problems.append("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
    if problems:
        raise _incomplete(" ".join(problems) + f" Authorization={header[:256]}")
    scope = parts["Credential"].split("/")
    if len(scope) != 5:
        raise _incomplete("Credential must have exactly 5 slash-delimited elements, e.g. "
                          f"keyid/date/region/service/term, got '{parts['Credential'][:256]}'")
    key_id, scope_date, region, service, terminator = scope
    if terminator != "aws4_request":
        raise _invalid(f"Credential should be scoped with a valid terminator: 'aws4_request', not '{terminator[:64]}'.")
    if service != SERVICE:
        raise _invalid(f"Credential should be scoped to correct service: '{SERVICE}'. ")
    if not REGION_NAME.fullmatch(region):
        raise _invalid(f"Credential should be scoped to a valid region, not '{region[:64]}'. ")
    key = accounts.key(key_id)
    if key is None or not key.account.serves(region):
        raise _unrecognized()
    token = fields.get("x-amz-security-token", [None])[0]
    if key.session_token is None:
        if token is not None:
            raise _unrecognized()
    elif token is None or not hmac.compare_digest(token.encode(), key.session_token.encode()):
        raise _unrecognized()
    if key.expires_s is not None and now_s >= key.expires_s:
        raise AwsError("ExpiredTokenException", "The security token included in the request is expired")
    stamp, moment = amz_date
    _check_time(stamp, moment, now_s)
    if scope_date != stamp[:8]:
        raise _invalid(f"Date in Credential scope does not match YYYYMMDD from ISO-8601 version of date from HTTP: "
                       f"'{scope_date[:16]}' != '{stamp[:8]}', from '{stamp}'.")
    signed = parts["SignedHeaders"].split(";")
    if "host" not in signed:
        raise _invalid("'Host' or ':authority' must be a 'SignedHeader' in the AWS Authorization.")
    body_hash = hashlib.sha256(body).hexdigest()
    claimed = fields.get("x-amz-content-sha256", [None])[0]
    if claimed is not None and claimed != body_hash:
        raise _invalid("The provided 'x-amz-content-sha256' header does not match what was computed.")
    expected = _signature(key, region, method, raw_path, query, fields, signed, stamp, body_hash)
    if not hmac.compare_digest(expected, parts["Signature"]):
        raise _invalid("The request signature we calculated does not match the signature you provided. Check your "
                       "AWS Secret Access Key and signing method. Consult the service documentation for details.")
    return Caller(key, region)


def _request_time(fields: dict[str, list[str]]) -> tuple[str, datetime.datetime] | None:
    """The request's time as SigV4 signs it (X-Amz-Date, else Date), and as a moment; None if it has none.
    A time that does not parse is the client's mistake, answered at once."""
    if "x-amz-date" in fields:
        stamp = fields["x-amz-date"][0]
        try:
            if not (len(stamp) == 16 and stamp[:8].isdigit() and stamp[8] == "T" and stamp[9:15].isdigit()
                    and stamp[15] == "Z"):
                raise ValueError(stamp)
            return stamp, datetime.datetime(int(stamp[:4]), int(stamp[4:6]), int(stamp[6:8]), int(stamp[9:11]),
                                            int(stamp[11:13]), int(stamp[13:15]), tzinfo=datetime.UTC)
        except ValueError:
            raise _incomplete(f"Date must be in ISO-8601 'basic format'. Got '{stamp[:64]}'. See "
                              "http://en.wikipedia.org/wiki/ISO_8601") from None
    if "date" in fields:
        try:
            moment = email.utils.parsedate_to_datetime(fields["date"][0])
        except (TypeError, ValueError):
            moment = None
        if moment is None or moment.tzinfo is None:
            raise _incomplete(f"Date must be an RFC 1123 date. Got '{fields['date'][0][:64]}'.")
        return moment.astimezone(datetime.UTC).strftime(_AMZ_DATE), moment
    return None


def _check_time(stamp: str, moment: datetime.datetime, now_s: float) -> None:
    def form(seconds: float) -> str:
        return datetime.datetime.fromtimestamp(seconds, datetime.UTC).strftime(_AMZ_DATE)
    if moment.timestamp() < now_s - SKEW_S:
        raise _invalid(f"Signature expired: {stamp} is now earlier than {form(now_s - SKEW_S)} "
                       f"({form(now_s)} - 5 min.)")
    if moment.timestamp() > now_s + SKEW_S:
        raise _invalid(f"Signature not yet current: {stamp} is still later than {form(now_s + SKEW_S)} "
                       f"({form(now_s)} + 5 min.)")


class _SignedHeaders(dict):
    """The headers the client named, as botocore's ``canonical_headers`` reads them (names, then each one's
    values), without building an ``email.message`` for every request."""

    def get_all(self, name: str) -> list[str]:
        return self.get(name, [])


class _Recomputed(SigV4Auth):
    """botocore's signer over the headers the client named and the body hash computed once; the signing key
    (four HMACs over the secret, the day, the region and the service) kept for the day."""

    def __init__(self, key: Key, region: str, signed: list[str], headers: _SignedHeaders, body_hash: str) -> None:
        super().__init__(ReadOnlyCredentials(key.access_key_id, key.secret, key.session_token), SERVICE, region)
        self._signed = signed
        self._headers = headers
        self._body_hash = body_hash

    def headers_to_sign(self, request: AWSRequest) -> _SignedHeaders:
        return self._headers

    def signed_headers(self, headers_to_sign: object) -> str:
        return ";".join(self._signed)  # as the client listed them: a header it named but did not send fails

    def payload(self, request: AWSRequest) -> str:
        return self._body_hash

    def signature(self, string_to_sign: str, request: AWSRequest) -> str:
        day = request.context["timestamp"][:8]
        cached = (self.credentials.access_key, self.credentials.secret_key, day, self._region_name)
        signing_key = _SIGNING_KEYS.get(cached)
        if signing_key is None:
            signing_key = self._sign(f"AWS4{self.credentials.secret_key}".encode(), day)
            for part in (self._region_name, SERVICE, "aws4_request"):
                signing_key = self._sign(signing_key, part)
            if len(_SIGNING_KEYS) >= SIGNING_KEYS_MAX:
                _SIGNING_KEYS.clear()
            _SIGNING_KEYS[cached] = signing_key
        return self._sign(signing_key, string_to_sign, hex=True)


SIGNING_KEYS_MAX = 10_000  # keys x days x regions in use; only keys of the accounts file get here
_SIGNING_KEYS: dict[tuple[str, str, str, str], bytes] = {}


def _signature(key: Key, region: str, method: str, raw_path: bytes, query: bytes, fields: dict[str, list[str]],
               signed: list[str], stamp: str, body_hash: str) -> str:
    request = AWSRequest(method=method, url=f"http://{fields.get('host', [''])[0]}{raw_path.decode('latin-1')}"
                                            + (f"?{query.decode('latin-1')}" if query else ""))
    request.context["timestamp"] = stamp
    signer = _Recomputed(key, region, signed, _SignedHeaders({name: fields[name] for name in signed if name in fields}),
                         body_hash)
    return signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
