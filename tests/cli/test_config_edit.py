"""Writing keys into a commented TOML config: every other line stays as it was."""

from __future__ import annotations

import tomllib

import pytest

from daemon.cli.setup.config_edit import ConfigEditError, TableUpdate, apply_updates

CONFIG = """\
# My rig. Keep these notes.
[rig]
# Expected number of cards.
# card_count = 4
memory_total_mib = 65536   # unlocked
power_cap_w = 180.00
temperature_warn_c = 75.0  # this rig runs hot

# The next table's own comment.
[rig.pcie_baseline]
# "0000:01:00.0" = { gen = 2, width = 4 }
"0000:99:00.0" = { gen = 3, width = 16 }  # a card sold last year

[web]
listen = "127.0.0.1:8170"
"""


def test_new_keys_go_after_their_commented_example_or_the_tables_last_key() -> None:
    edited = apply_updates(
        CONFIG,
        [
            TableUpdate(
                ("rig",), {"card_count": 8, "pcie_gen_min": 2}, comments={"card_count": "init"}
            ),
            TableUpdate(("host",), {"kernel_release": "6.1.0-28-amd64"}),
        ],
    )
    lines = edited.splitlines()
    assert lines[lines.index("# card_count = 4") + 1] == "card_count = 8  # init"
    assert lines[lines.index("temperature_warn_c = 75.0  # this rig runs hot") + 1] == (
        "pcie_gen_min = 2"
    )
    assert edited.endswith('\n[host]\nkernel_release = "6.1.0-28-amd64"\n')
    # Every original line is still there, in order (the additions only interleave).
    kept = iter(lines)
    assert all(line in kept for line in CONFIG.splitlines())


def test_changed_values_change_in_place_and_equal_ones_are_not_touched() -> None:
    edited = apply_updates(
        CONFIG, [TableUpdate(("rig",), {"memory_total_mib": 8192, "power_cap_w": 180.0})]
    )
    assert "memory_total_mib = 8192 # unlocked" in edited  # its comment kept
    assert "power_cap_w = 180.00\n" in edited  # equal: its spelling kept
    assert edited.replace("8192 # unlocked", "65536   # unlocked") == CONFIG


def test_a_replaced_table_loses_keys_it_no_longer_has() -> None:
    update = TableUpdate(
        ("rig", "pcie_baseline"),
        {"0000:01:00.0": {"gen": 2, "width": 4}},
        replace=True,
        comments={"0000:01:00.0": "card 0"},
    )
    edited = apply_updates(CONFIG, [update])
    assert "0000:99:00.0" not in edited
    assert '"0000:01:00.0" = { gen = 2, width = 4 }  # card 0' in edited
    assert tomllib.loads(edited)["rig"]["pcie_baseline"] == {"0000:01:00.0": {"gen": 2, "width": 4}}
    assert "# The next table's own comment.\n[rig.pcie_baseline]" in edited
    assert apply_updates(edited, [update]) == edited  # a second run changes nothing


def test_an_empty_config_gets_the_tables() -> None:
    edited = apply_updates("", [TableUpdate(("rig",), {"card_count": 3})])
    assert tomllib.loads(edited) == {"rig": {"card_count": 3}}


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("[rig\n", "not valid TOML"),
        ("rig = { card_count = 4 }\n", "rig is an inline table here: write it as [rig]"),
        ("rig = 4\n", "rig is a value here, not a table"),
    ],
)
def test_a_config_that_cannot_take_the_edit_is_refused(text: str, words: str) -> None:
    with pytest.raises(ConfigEditError, match=words.replace("[", r"\[").replace("]", r"\]")):
        apply_updates(text, [TableUpdate(("rig",), {"card_count": 3})])
