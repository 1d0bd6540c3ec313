"""The Redis (or Valkey) capability store: facts shared by several replicas, changes announced on pub/sub.

Keys, under a prefix (``toolshim`` unless the URL says ``?prefix=…``):

* ``<p>:facts:<upstream>\\x1f<model>``: a hash, field ``<name>\\x1f<source>``, value the JSON
  ``[value, updated_at, detail]``; ``<p>:index``: the set of every such (upstream, model);
* ``<p>:seen``: a hash, field ``<upstream>\\x1f<model>``, value the time it was last listed;
* ``<p>:doc:<key>``: a document (with Redis's own expiry); ``<p>:docs``: a sorted set of
  document keys by age, trimmed to the limit;
* ``<p>:schema``: the schema version; ``<p>:changes``: the pub/sub channel.

Each write is one Lua script: compare-and-set of the layer (an older fact from the same source
never replaces a newer one), index, and ``PUBLISH`` of the (upstream, model), atomically.
:data:`MIGRATIONS` run on first connection under a lock key (``SET NX`` with an expiry), so
replicas starting at once migrate one at a time. The server may be away: any method raises
:class:`~toolshim.errors.StoreError` until it is back.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar
from urllib.parse import parse_qsl, urlencode, urlsplit

from toolshim.capabilities.facts import Fact, strongest
from toolshim.capabilities.store import (
    Changed,
    DocumentWrite,
    document_json,
    document_value,
    scrub,
)
from toolshim.capabilities.stores.base import Forgetting, SharedStore, stored_fact
from toolshim.capabilities.stores.listening import ListeningWatch, Receive
from toolshim.errors import StoreError
from toolshim.extras import require

__all__ = ["MIGRATIONS", "RedisStore", "RedisWatch"]

log = logging.getLogger("toolshim.capabilities")

SEP = "\x1f"

_PUT = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if (not current) or (tonumber(cjson.decode(current)[2]) <= tonumber(ARGV[3])) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
redis.call('SADD', KEYS[2], ARGV[4])
redis.call('PUBLISH', ARGV[5], ARGV[6])
return redis.call('HGETALL', KEYS[1])
"""

_FORGET = """
local removed = 0
local fields = redis.call('HKEYS', KEYS[1])
local names = cjson.decode(ARGV[1])
local sources = cjson.decode(ARGV[2])
for _, field in ipairs(fields) do
  local cut = string.find(field, ARGV[3], 1, true)
  local name = string.sub(field, 1, cut - 1)
  local source = string.sub(field, cut + 1)
  if (names == cjson.null or names[name]) and (sources == cjson.null or sources[source]) then
    redis.call('HDEL', KEYS[1], field)
    removed = removed + 1
  end
end
if redis.call('HLEN', KEYS[1]) == 0 then
  redis.call('SREM', KEYS[2], ARGV[4])
end
return removed
"""

_PUT_DOCUMENT = """
if ARGV[3] == '' then
  redis.call('SET', KEYS[1], ARGV[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[3])
end
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[5])
local extra = redis.call('ZCARD', KEYS[2]) - tonumber(ARGV[4])
if extra > 0 then
  for _, old in ipairs(redis.call('ZRANGE', KEYS[2], 0, extra - 1)) do
    redis.call('DEL', ARGV[6] .. old)
  end
  redis.call('ZREMRANGEBYRANK', KEYS[2], 0, extra - 1)
end
return 1
"""

MIGRATIONS: list[Callable[[Any, str], None]] = [
    # 1: the layout described above (nothing to convert: the first schema).
    lambda client, prefix: None,
]

T = TypeVar("T")


def _redis() -> Any:
    return require("redis", "redis", "a redis:// registry needs redis-py", param="registry")


class RedisStore(SharedStore):
    """Facts in Redis or Valkey, shared by every replica that points at the same server."""

    def _connect_to(self, url: str, timeout: float) -> None:
        self._redis = _redis()
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query))
        self.prefix = query.pop("prefix", "toolshim")
        if parts.scheme.startswith("valkey"):
            parts = parts._replace(scheme=parts.scheme.replace("valkey", "redis"))
        self._url = parts._replace(query=urlencode(query)).geturl()
        from redis.backoff import NoBackoff
        from redis.retry import Retry

        try:
            self._client = self._redis.Redis.from_url(
                self._url,
                decode_responses=True,
                socket_timeout=timeout,
                socket_connect_timeout=timeout,
                retry=Retry(NoBackoff(), 0),
            )
            # Builds (without connecting) a connection from the URL's options: an unknown
            # or malformed one fails here, not on the first use by a background thread.
            self._client.connection_pool.make_connection().disconnect()
        except (TypeError, ValueError, self._redis.RedisError) as exc:
            raise self._malformed(self._scrub(exc)) from exc
        self._put = self._client.register_script(_PUT)
        self._forget_script = self._client.register_script(_FORGET)
        self._put_doc = self._client.register_script(_PUT_DOCUMENT)
        self._lock = threading.Lock()
        self._migrated = False

    def key(self, *parts: str) -> str:
        return ":".join((self.prefix, *parts))

    @property
    def channel(self) -> str:
        return self.key("changes")

    def _facts_key(self, upstream: str, model: str) -> str:
        return self.key("facts", f"{upstream}{SEP}{model}")

    # -- connecting, migrating ----------------------------------------------------------------

    def pubsub(self) -> Any:
        """A pub/sub connection of its own (for :class:`RedisWatch`)."""
        return self._client.pubsub(ignore_subscribe_messages=True)

    def _run(self, work: Callable[[Any], T]) -> T:
        try:
            if not self._migrated:
                with self._lock:
                    if not self._migrated:
                        self._migrate()
                        self._migrated = True
            return work(self._client)
        except self._redis.RedisError as exc:
            raise self._unusable(exc) from exc

    def _scrub(self, exc: BaseException) -> str:  # the whole message, not its first line
        return scrub(str(exc).strip() or type(exc).__name__, self._secret)

    def _migrate(self) -> None:
        client, lock = self._client, self.key("migrating")
        token = uuid.uuid4().hex
        deadline = time.monotonic() + 30
        while True:
            version = int(client.get(self.key("schema")) or 0)
            self._check_schema(version, len(MIGRATIONS))
            if version == len(MIGRATIONS):
                return
            if client.set(lock, token, nx=True, px=30_000):
                break
            if time.monotonic() > deadline:
                raise StoreError(f"the capability store at {self.location} is being migrated")
            time.sleep(0.05)  # another replica migrates: wait for it
        try:
            version = int(client.get(self.key("schema")) or 0)
            for number, step in enumerate(MIGRATIONS[version:], start=version + 1):
                step(client, self.prefix)
                client.set(self.key("schema"), number)
                log.info("migrated the capability store at %s to schema %d", self.location, number)
        finally:
            if client.get(lock) == token:
                client.delete(lock)

    def schema_version(self) -> int:
        return int(self._run(lambda c: c.get(self.key("schema"))) or 0)

    # -- facts --------------------------------------------------------------------------------

    def _read(self, keys: Sequence[tuple[str, str]]) -> list[tuple[str, str, Fact]]:
        def work(client: Any) -> list[dict[str, str]]:
            pipe = client.pipeline(transaction=False)
            for upstream, model in keys:
                pipe.hgetall(self._facts_key(upstream, model))
            return list(pipe.execute())

        out = []
        for (upstream, model), fields in zip(keys, self._run(work), strict=True):
            out += [(upstream, model, _fact(f, v)) for f, v in fields.items()]
        return out

    def rows(self, model: str, upstreams: Sequence[str]) -> list[tuple[str, Fact]]:
        return [(u, f) for u, _, f in self._read([(u, model) for u in upstreams])]

    def _index(self) -> list[tuple[str, str]]:
        members = self._run(lambda c: c.smembers(self.key("index")))
        return sorted(tuple(m.split(SEP, 1)) for m in members)

    def snapshot(self) -> list[tuple[str, str, Fact]]:
        return self._read(self._index())

    def put(self, upstream: str, model: str, fact: Fact) -> Fact:
        field = f"{fact.name}{SEP}{fact.source.value}"
        body = json.dumps([fact.value, fact.updated_at, fact.detail])
        found = self._run(
            lambda c: self._put(
                keys=[self._facts_key(upstream, model), self.key("index")],
                args=[
                    field,
                    body,
                    repr(fact.updated_at),
                    f"{upstream}{SEP}{model}",
                    self.channel,
                    json.dumps([upstream, model]),
                ],
            )
        )
        pairs = dict(zip(found[::2], found[1::2], strict=True))
        winner = strongest(_fact(f, v) for f, v in pairs.items() if f.split(SEP, 1)[0] == fact.name)
        return winner if winner is not None else fact

    def _forget(self, which: Forgetting) -> int:
        upstream, model = which.upstream, which.model
        scopes = [upstream] if upstream is not None else [u for u, m in self._index() if m == model]
        only_names = json.dumps(
            dict.fromkeys(which.names, True) if which.names is not None else None
        )
        only_sources = json.dumps(
            dict.fromkeys(which.sources, True) if which.sources is not None else None
        )
        removed = 0
        for scope in scopes:
            removed += int(
                self._run(
                    lambda c, scope=scope: self._forget_script(  # type: ignore[misc]
                        keys=[self._facts_key(scope, model), self.key("index")],
                        args=[only_names, only_sources, SEP, f"{scope}{SEP}{model}"],
                    )
                )
            )
        self._run(lambda c: c.publish(self.channel, json.dumps([upstream, model])))
        return removed

    def _record_seen(self, rows: list[tuple[str, str, float]]) -> None:
        fields = {f"{upstream}{SEP}{m}": stamp for upstream, m, stamp in rows}
        self._run(lambda c: c.hset(self.key("seen"), mapping=fields))

    def _seen_rows(self) -> Iterable[Sequence[Any]]:
        found = self._run(lambda c: c.hgetall(self.key("seen")))
        return [(*field.split(SEP, 1), stamp) for field, stamp in found.items()]

    def watch(self, changed: Changed) -> RedisWatch:
        return RedisWatch(self, changed)

    # -- documents ----------------------------------------------------------------------------

    def put_document(self, key: str, document: Any, *, ttl: float | None = None) -> None:
        self.write_documents([DocumentWrite(key, document_json(key, document), ttl)])

    def write_documents(self, writes: Sequence[DocumentWrite]) -> None:
        def work(client: Any) -> None:
            pipe = client.pipeline(transaction=True)  # MULTI … EXEC: all or none
            now = repr(time.time())
            for write in writes:
                if write.body is None:
                    pipe.delete(self.key("doc", write.key))
                    pipe.zrem(self.key("docs"), write.key)
                    continue
                self._put_doc(
                    keys=[self.key("doc", write.key), self.key("docs")],
                    args=[
                        write.body,
                        now,
                        "" if write.ttl is None else str(max(1, int(write.ttl * 1000))),
                        self.document_limit,
                        write.key,
                        self.key("doc", ""),
                    ],
                    client=pipe,
                )
            pipe.execute()

        self._run(work)

    def get_document(self, key: str) -> Any | None:
        body = self._run(lambda c: c.get(self.key("doc", key)))
        return document_value(body) if body is not None else None

    def delete_document(self, key: str) -> bool:
        def work(client: Any) -> int:
            pipe = client.pipeline()
            pipe.delete(self.key("doc", key))
            pipe.zrem(self.key("docs"), key)
            return int(pipe.execute()[0])

        return self._run(work) > 0

    def close(self) -> None:
        self._client.close()


class RedisWatch(ListeningWatch):
    """Subscribes to the store's channel on a connection of its own (a thread), calling
    ``changed`` for each message, and ``changed(None, None)`` each time it (re)subscribes:
    whatever happened while it was not listening must be re-read."""

    def __init__(self, store: RedisStore, changed: Changed) -> None:
        self._store = store
        super().__init__(store.location, changed, store._redis.RedisError, store._scrub)

    @contextlib.contextmanager
    def _subscribed(self) -> Iterator[Receive]:
        pubsub = self._store.pubsub()
        try:
            pubsub.subscribe(self._store.channel)

            def receive(timeout: float) -> list[str]:
                message = pubsub.get_message(timeout=timeout)
                if message and message.get("type") == "message":
                    return [str(message["data"])]
                return []

            yield receive
        finally:
            with contextlib.suppress(self._store._redis.RedisError):
                pubsub.close()


def _fact(field: str, body: str) -> Fact:
    name, source = field.split(SEP, 1)
    return stored_fact(name, lambda: json.loads(body), source)
