"""The guard's pure parts: pins, mirror, cap, keys, sessions, SSE framing, error shapes."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from serving.detectors import Sign
from serving.guard import errors
from serving.guard.cap import CapAction, fallback_tokens, judge, may_exceed, prompt_chars
from serving.guard.keys import MIN_KEY_CHARS, KeyRing, UnusableKey, bearer, hash_key, new_key
from serving.guard.mirror import mirror_choices, mirror_fields
from serving.guard.pinning import apply_pins
from serving.guard.sessions import SessionBook, Thresholds, session_id
from serving.guard.settings import GuardSettings
from serving.guard.sse import DONE, EventSplitter, event_data, event_json
from serving.guard.watch import ReplyWatch

PINS = {"chat_template_kwargs": {"thinking": True, "reasoning_effort": "max"}}


# -- pins -----------------------------------------------------------------------------------
def test_a_pin_is_set_where_the_client_left_it_out() -> None:
    request: dict[str, object] = {"messages": []}
    assert apply_pins(request, PINS, override=False) == ["chat_template_kwargs"]
    assert request["chat_template_kwargs"] == {"thinking": True, "reasoning_effort": "max"}


def test_a_pin_merges_into_the_clients_table_and_keeps_its_values() -> None:
    request: dict[str, object] = {"chat_template_kwargs": {"reasoning_effort": "high", "x": 1}}
    changed = apply_pins(request, PINS, override=False)
    assert changed == ["chat_template_kwargs.thinking"]
    assert request["chat_template_kwargs"] == {"reasoning_effort": "high", "x": 1, "thinking": True}


def test_override_replaces_what_the_client_sent() -> None:
    request: dict[str, object] = {"chat_template_kwargs": {"reasoning_effort": "low"}, "top_p": 1}
    changed = apply_pins(request, {**PINS, "top_p": 0.95}, override=True)
    assert request["chat_template_kwargs"] == {"reasoning_effort": "max", "thinking": True}
    assert request["top_p"] == 0.95
    assert set(changed) == {
        "chat_template_kwargs.reasoning_effort",
        "chat_template_kwargs.thinking",
        "top_p",
    }


def test_a_null_counts_as_left_out_and_chat_only_pins_skip_completions() -> None:
    request: dict[str, object] = {"chat_template_kwargs": None, "prompt": "x"}
    assert apply_pins(request, PINS, override=False, chat=False) == []
    assert apply_pins(request, PINS, override=False) == ["chat_template_kwargs"]


def test_pins_are_per_profile() -> None:
    settings = GuardSettings.model_validate(
        {
            "pin": PINS,
            "profiles": {"glm": {"pin": {"chat_template_kwargs": {"enable_thinking": True}}}},
        }
    )
    assert settings.pins_for("default") == (PINS, False)
    assert settings.pins_for("glm") == ({"chat_template_kwargs": {"enable_thinking": True}}, False)


def test_settings_refuse_pinning_the_conversation_and_bad_values() -> None:
    with pytest.raises(ValidationError, match="'messages' cannot be pinned"):
        GuardSettings.model_validate({"pin": {"messages": []}})
    with pytest.raises(ValidationError, match="HOST:PORT"):
        GuardSettings.model_validate({"listen": "8098"})
    hashed = hash_key(new_key())
    with pytest.raises(ValidationError, match="used twice"):
        GuardSettings.model_validate(
            {"keys": [{"name": "a", "sha256": hashed}, {"name": "a", "sha256": hashed}]}
        )
    with pytest.raises(ValidationError):
        GuardSettings.model_validate({"keys": [{"name": "a", "sha256": "plain-key"}]})


# -- mirror ---------------------------------------------------------------------------------
def test_mirror_copies_reasoning_only_when_one_field_is_set() -> None:
    message = {"content": "4", "reasoning": "2+2"}
    assert mirror_fields(message, "reasoning_content")
    assert message["reasoning_content"] == "2+2"
    both = {"reasoning": "a", "reasoning_content": "b"}
    assert not mirror_fields(both, "reasoning_content")
    assert both == {"reasoning": "a", "reasoning_content": "b"}
    other_way = {"reasoning_content": "x"}
    assert not mirror_fields(dict(other_way), "reasoning_content")
    assert mirror_fields(other_way, "reasoning")
    assert other_way["reasoning"] == "x"
    assert not mirror_fields({"reasoning": "x"}, "")


def test_mirror_in_streamed_deltas_leaves_the_rest_alone() -> None:
    chunk = {
        "id": "c1",
        "extra": {"kept": True},
        "choices": [{"index": 0, "delta": {"reasoning": "The "}, "finish_reason": None}],
    }
    assert mirror_choices(chunk, "both", "delta")
    assert chunk["choices"][0]["delta"] == {"reasoning": "The ", "reasoning_content": "The "}
    assert chunk["extra"] == {"kept": True}
    content_only = {"choices": [{"index": 0, "delta": {"content": "hi"}}]}
    assert not mirror_choices(content_only, "both", "delta")
    assert not mirror_choices({"choices": []}, "both", "delta")


# -- cap ------------------------------------------------------------------------------------
def test_the_tokenizer_is_asked_only_when_the_prompt_could_be_over_the_cap() -> None:
    short = {"messages": [{"role": "user", "content": "hello"}]}
    long = {"messages": [{"role": "user", "content": "word " * 100}]}
    assert not may_exceed(short, 100)
    assert may_exceed(long, 100)
    assert prompt_chars({"prompt": "abc"}) == 3


def test_cap_decisions() -> None:
    assert judge(100, 100, "refuse", "tokenize").action is CapAction.PASS
    assert judge(101, 100, "refuse", "tokenize").action is CapAction.REFUSE
    assert judge(101, 100, "warn", "tokenize").action is CapAction.WARN
    request = {"messages": [{"role": "user", "content": "x" * 400}]}
    assert fallback_tokens(request, None) == (400 + len("user") + 8) // 4  # chars/4
    assert fallback_tokens(request, 5000) == 5000  # the session's known depth wins


# -- keys -----------------------------------------------------------------------------------
def test_keys_are_stored_hashed_and_matched_by_name() -> None:
    key = new_key()
    hashed = hash_key(key)
    assert key not in hashed
    assert hashed.startswith("sha256:")
    assert hash_key(key) != hashed  # a fresh salt each time
    ring = KeyRing([("laptop", hashed), ("ci", hash_key(new_key()))])
    assert ring.enabled
    assert ring.name_of(key) == "laptop"
    assert ring.name_of(key + "x") is None
    assert not KeyRing([]).enabled
    with pytest.raises(UnusableKey, match=str(MIN_KEY_CHARS)):
        hash_key("short")


def test_bearer_tokens() -> None:
    assert bearer("Bearer abc") == "abc"
    assert bearer("bearer  abc ") == "abc"
    assert bearer("Basic abc") is None
    assert bearer(None) is None
    assert bearer("Bearer ") is None


# -- error shapes ---------------------------------------------------------------------------
def test_errors_have_openais_shape() -> None:
    for error in (
        errors.missing_key(),
        errors.wrong_key(),
        errors.over_cap(120_000, 115_000),
        errors.engine_unavailable("the engine is starting", 10),
        errors.stream_lost("reset"),
    ):
        body = json.loads(error.body())
        assert set(body) == {"error"}
        assert set(body["error"]) == {"message", "type", "param", "code"}
    cap = errors.over_cap(120_000, 115_000)
    assert cap.status == 400
    assert cap.code == "context_length_exceeded"
    assert "115000" in cap.message
    assert "new session" in cap.message
    unavailable = errors.engine_unavailable("the engine is starting", 10)
    assert unavailable.status == 503
    assert (b"retry-after", b"10") in unavailable.headers()
    assert errors.missing_key().status == errors.wrong_key().status == 401
    event = errors.stream_lost("reset").event()
    assert event.startswith(b"data: {") and event.endswith(b"\n\n")


# -- SSE framing ----------------------------------------------------------------------------
def test_events_split_across_reads_come_out_whole() -> None:
    splitter = EventSplitter()
    stream = b'data: {"a": 1}\n\ndata: {"b": 2}\n\ndata: [DONE]\n\n'
    events: list[bytes] = []
    for i in range(0, len(stream), 7):
        events += splitter.feed(stream[i : i + 7])
    assert events == [b'data: {"a": 1}\n\n', b'data: {"b": 2}\n\n', b"data: [DONE]\n\n"]
    assert event_json(event_data(events[0]) or b"") == {"a": 1}
    assert event_data(events[2]) == DONE
    assert event_data(b": ping\n\n") is None
    assert splitter.feed(b"data: cut") == []
    assert splitter.rest() == b"data: cut"


# -- watch and sessions ---------------------------------------------------------------------
def test_a_streamed_reply_is_watched_and_judged_at_the_end() -> None:
    watch = ReplyWatch.for_request({"tools": [{}], "chat_template_kwargs": {"thinking": True}}, 3)
    for piece in ("Let me ", "check the file."):
        watch.chunk({"choices": [{"index": 0, "delta": {"content": piece, "reasoning": "r"}}]})
    watch.chunk({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3}})
    assert watch.signs() == {Sign.ANNOUNCED_NO_CALL}
    assert watch.usage is not None
    assert watch.usage.prompt_tokens == 12


def test_a_session_keeps_its_id_turn_after_turn() -> None:
    first = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]}
    later = {"messages": [*first["messages"], {"role": "assistant", "content": "a"}]}
    assert session_id(first, None, "k") == session_id(later, None, "k")
    other = {"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "z"}]}
    assert session_id(other, None, "k") != session_id(first, None, "k")
    assert session_id(first, "conv-7", "k") == session_id(other, "conv-7", "k")
    assert "q" not in session_id(first, None, "k")
    # Within a key: the same name or the same opening under another key is another session.
    assert session_id(first, "conv-7", "alice") != session_id(first, "conv-7", "bob")
    assert session_id(first, None, "alice") != session_id(first, None, "bob")


def test_a_session_crossing_a_threshold_is_news_once() -> None:
    book = SessionBook(Thresholds(depth_tokens=1000, leaks=2, loops=5))
    session = book.touch("s1", "laptop")
    book.observe(session, 500, [Sign.DSML_MARKUP])
    assert book.news_since(0) == []
    book.observe(session, 1200, [Sign.DSML_MARKUP])
    news = book.news_since(0)
    assert [item.kind for item in news] == ["depth", "leaks"]
    assert "1200 tokens deep" in news[0].message
    book.observe(session, 1300, [Sign.DSML_MARKUP])
    assert book.news_since(news[-1].seq) == []
    row = session.as_dict(0)
    assert row["leaks_last_hour"] == 3
    assert row["depth_tokens"] == 1300
