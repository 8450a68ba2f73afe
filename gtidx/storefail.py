"""What an object store's failure means (fsspec/s3fs, botocore, aiohttp
raise many kinds): each kind one GtidxError with a line a user can act on,
exit 3 (``failure``), or 2 for an option the file system does not take."""
from __future__ import annotations

from .errors import BadInputError, GtidxError, GtidxIOError


def failure(e: BaseException, path: str) -> GtidxError:
    """An fsspec/botocore failure as one line: exit 3, or 2 for an
    option the file system does not take (s3fs says so at first use)."""
    if isinstance(e, GtidxError):
        return e
    if isinstance(e, TypeError) and "keyword argument" in str(e):
        return BadInputError(f"bad storage option: {reason(e)}", path=path)
    if isinstance(e, FileNotFoundError):
        return GtidxIOError("no such object, prefix or bucket", path=path)
    if precondition_failed(e):
        return GtidxIOError("object changed while it was read (replaced or rewritten: its ETag is not "
                            "the one it was opened with)", path=path,
                            hint="run again: the lookup reads the object as it is now")
    if throttled(e):
        return GtidxIOError("the object store throttles the requests (503 SlowDown), also after retries "
                            "with backoff", path=path, hint="try again later, or with fewer readers at once")
    if cut(e):
        return GtidxIOError(f"{CUT}: {reason(e)}", path=path, hint="try again")
    if timed_out(e):
        return GtidxIOError(f"the object store timed out: {reason(e)}", path=path,
                            hint="a slow or overloaded endpoint: try again, or raise read_timeout "
                                 "(--storage-option 'config_kwargs={\"read_timeout\": 120}')")
    if isinstance(e, PermissionError):
        return GtidxIOError(f"access denied: {reason(e)}", path=path,
                            hint="check the credentials (AWS_* variables, profile or --storage-option)")
    return GtidxIOError(f"object store failed: {reason(e)}", path=path,
                        hint="is the endpoint up (AWS_ENDPOINT_URL / endpoint_url)?")


def precondition_failed(e: BaseException) -> bool:
    """An If-Match read of an object that is no longer the one opened (S3's
    412 PreconditionFailed, as botocore or s3fs's translation of it says)."""
    return any(code(x) in ("PreconditionFailed", "412") or "pre-conditions you specified did not hold" in str(x)
               for x in chain(e))


def throttled(e: BaseException) -> bool:
    """S3's 503 SlowDown / Service Unavailable, after the retries."""
    return any(code(x) in ("SlowDown", "503", "ServiceUnavailable", "Throttling", "RequestLimitExceeded")
               or "SlowDown" in str(x) or "Service Unavailable" in str(x) for x in chain(e))


CUT = "the object store's answer was cut"


def cut(e: BaseException) -> bool:
    """A transfer broken half-way: fewer body bytes than its Content-Length
    (aiohttp's ContentLengthError / ClientPayloadError, http.client's IncompleteRead)."""
    return any(type(x).__name__ in ("ContentLengthError", "ClientPayloadError", "IncompleteRead",
                                    "ResponseStreamingError")
               or "payload is not completed" in str(x) for x in chain(e))


def timed_out(e: BaseException) -> bool:
    return any(isinstance(x, TimeoutError) or type(x).__name__ in ("ReadTimeoutError", "ConnectTimeoutError",
                                                                   "ServerTimeoutError")
               or "timeout" in str(x).lower() for x in chain(e))


def chain(e: BaseException):
    """``e`` and the exceptions it was raised from (s3fs translates botocore's)."""
    seen = set()
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        yield e
        e = e.__cause__ or e.__context__


def code(e: BaseException):
    response = getattr(e, "response", None)
    return response.get("Error", {}).get("Code") if isinstance(response, dict) else None


def reason(e: BaseException) -> str:
    text = str(e).strip().splitlines()
    return (text[0] if text else type(e).__name__)[:300]


__all__ = ["CUT", "failure", "precondition_failed", "throttled", "cut", "timed_out", "chain", "code", "reason"]
