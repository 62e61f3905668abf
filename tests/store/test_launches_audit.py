"""Launch history (with secrets masked) and the audit trail."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from daemon.store import Store
from serving.recipe.masking import mask_argv, mask_env
from tests.support.store_rows import at

ARGV = [
    "vllm",
    "serve",
    "/models/dsv4-flash",
    "--api-key",
    "sk-live-123",
    "--hf-token=hf_abcdef",
    "--tokenizer",
    "/models/tok",
    "--max-num-batched-tokens",
    "8192",
    "-e",
    "HF_TOKEN=hf_zzz",
    "-e",
    "VLLM_USE_V1=1",
]
ENV = {
    "HF_TOKEN": "hf_secret",
    "OPENAI_API_KEY": "sk-1",
    "db_password": "pw",
    "AWS_SECRET_ACCESS_KEY": "aws",
    "DSV4_LOGITS_ROW_CHUNK": "4096",
    "CUDA_VISIBLE_DEVICES": "0,1,2,3",
}


def test_launch_history_masks_secrets_and_finds_the_last_ready_one(store: Store) -> None:
    first = store.record_launch(ARGV, ENV, "sha256:aaa", started_at=at(0))
    second = store.record_launch(["vllm", "serve"], {}, "sha256:bbb", started_at=at(100))

    assert store.last_ready_launch() is None
    assert store.update_launch(first, ready_at=at(60)) is True
    assert store.update_launch(second, ended_at=at(130), exit_code=1, crash_class="cuda_oom")
    assert store.update_launch(999, ready_at=at(1)) is False

    ready = store.last_ready_launch()
    assert ready is not None
    assert (ready.id, ready.recipe_hash, ready.ready_at) == (first, "sha256:aaa", at(60))
    assert ready.env == {
        "HF_TOKEN": "***",
        "OPENAI_API_KEY": "***",
        "db_password": "***",
        "AWS_SECRET_ACCESS_KEY": "***",
        "DSV4_LOGITS_ROW_CHUNK": "4096",
        "CUDA_VISIBLE_DEVICES": "0,1,2,3",
    }
    assert ready.argv == [
        "vllm",
        "serve",
        "/models/dsv4-flash",
        "--api-key",
        "***",
        "--hf-token=***",
        "--tokenizer",
        "/models/tok",
        "--max-num-batched-tokens",
        "8192",
        "-e",
        "HF_TOKEN=***",
        "-e",
        "VLLM_USE_V1=1",
    ]
    crashed = store.get_launch(second)
    assert crashed is not None
    assert (crashed.exit_code, crashed.crash_class, crashed.ended_at) == (1, "cuda_oom", at(130))
    assert [launch.id for launch in store.list_launches()] == [second, first]
    assert crashed.to_dict() == {
        "id": second,
        "started_at": "2025-03-01T12:01:40+00:00",
        "argv": ["vllm", "serve"],
        "env": {},
        "recipe_hash": "sha256:bbb",
        "ready_at": None,
        "ended_at": "2025-03-01T12:02:10+00:00",
        "exit_code": 1,
        "crash_class": "cuda_oom",
        "build_id": None,
        "engine": None,
    }


def test_each_engine_reads_its_own_launches(store: Store) -> None:
    """On a rig of several engines a side engine's launch never stands as the primary's
    last ready one (``recipe show --diff``, the crash evidence, adoption)."""
    primary = store.record_launch(["vllm", "serve", "/models/a"], {}, "sha256:a", at(0))
    side = store.record_launch(["vllm", "serve", "/models/q"], {}, "sha256:q", at(5), "qwen")
    store.update_launch(primary, ready_at=at(60))
    store.update_launch(side, ready_at=at(90))
    last = store.last_ready_launch()
    assert last is not None and last.id == primary and last.engine is None
    theirs = store.last_ready_launch("qwen")
    assert theirs is not None and theirs.id == side and theirs.engine == "qwen"
    assert [row.id for row in store.list_launches()] == [primary]
    assert [row.id for row in store.list_launches(engine="qwen")] == [side]
    assert store.last_ready_launch("other") is None


def test_audit_trail_round_trip(store: Store) -> None:
    store.audit("recovery", "stop_engine", "would stop", reason="Xid 79", dry_run=True, ts=at(0))
    store.audit(
        "alice",
        "clear_latch",
        "ok",
        target="reboot_latch",
        reason="reseated card 1",
        details={"via": "fleetctl"},
        ts=at(10),
    )

    newest, oldest = store.list_audit()

    assert (newest.actor, newest.action, newest.target, newest.outcome) == (
        "alice",
        "clear_latch",
        "reboot_latch",
        "ok",
    )
    assert (newest.dry_run, newest.details, newest.ts) == (False, {"via": "fleetctl"}, at(10))
    assert (oldest.dry_run, oldest.reason, oldest.details) == (True, "Xid 79", None)
    assert [row.actor for row in store.list_audit(since=at(5))] == ["alice"]


# Names built from words that are secret as a name's last word, words that are secret
# anywhere, and words that only look alike (a count of tokens, an author, a key's file).
_WORDS = st.sampled_from(
    [
        "HF",
        "VLLM",
        "MIN",
        "THINKING",
        "DB",
        "X1",
        "TOKEN",
        "TOKENS",
        "KEY",
        "KEYS",
        "PWD",
        "PASS",
        "PASSWORD",
        "SECRET",
        "AUTH",
        "AUTHOR",
        "FILE",
        "PATH",
        "CREDENTIALS",
    ]
)
_LAST_ONLY = {"TOKEN", "KEY", "KEYS", "PWD", "PASS"}  # KEYS: API_KEYS (issue 33)
_ANYWHERE = {"PASSWORD", "SECRET", "AUTH", "CREDENTIALS"}


@given(
    st.dictionaries(
        st.lists(_WORDS, min_size=1, max_size=4).map("_".join),
        st.text(alphabet="abc123", max_size=3),
    )
)
def test_mask_env_hides_exactly_the_secret_names(env: dict[str, str]) -> None:
    masked = mask_env(env)
    assert masked.keys() == env.keys()
    for key, value in env.items():
        words = key.split("_")
        single_pwd = words in (["PWD"],)  # the shell's working directory, not a password
        secret = not single_pwd and (words[-1] in _LAST_ONLY or bool(_ANYWHERE & set(words)))
        assert masked[key] == ("***" if secret else value), key


@given(st.lists(st.text().filter(lambda s: not s.startswith("-") and "=" not in s)))
def test_mask_argv_leaves_plain_arguments_alone(argv: list[str]) -> None:
    assert mask_argv(argv) == argv
