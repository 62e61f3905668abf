"""The shared reply detectors (serving.detectors): one implementation for canaries and guard."""

from __future__ import annotations

from serving.canary.reasoning import judge_reasoning
from serving.canary.toolcall import judge_tool_calls
from serving.detectors import (
    DSML_BAR,
    LEAKS,
    LOOPS,
    Reply,
    Sign,
    announced_without_call,
    reasoning_in_content,
    repeated_line,
    signs_of,
    think_problem,
    thinking_asked,
    tool_markup,
)

DSML_CALL = (
    f'<{DSML_BAR}DSML{DSML_BAR}tool_calls>\n<{DSML_BAR}DSML{DSML_BAR}invoke name="bash">\n'
    f'<{DSML_BAR}DSML{DSML_BAR}parameter name="cmd" string="true">ls</{DSML_BAR}DSML{DSML_BAR}parameter>'
)


def test_raw_tool_call_markup_is_found_in_every_spelling_seen() -> None:
    assert tool_markup(DSML_CALL) == f"<{DSML_BAR}DSML{DSML_BAR}"
    assert tool_markup('I will call it: <invoke name="read_file">') == "<invoke"
    assert tool_markup(f"<{DSML_BAR}DSML{DSML_BAR}_tool_calls>") is not None
    assert tool_markup("<|DSML|invoke name='x'>") == "<|DSML|"
    assert tool_markup("The file has 3 lines.") is None
    assert tool_markup(None) is None


def test_reasoning_in_content_by_tag_or_by_repetition() -> None:
    assert (
        reasoning_in_content("thinking...</think>The answer is 4.") == "a think tag is in content"
    )
    assert reasoning_in_content("2+2 is 4. The answer is 4.", ["2+2 is 4."]) is not None
    assert reasoning_in_content("The answer is 4.", ["2+2 is 4."]) is None
    assert reasoning_in_content("", ["x"]) is None


def test_think_blocks_unclosed_or_empty() -> None:
    assert think_problem("<think>let me see", "", False) is Sign.THINK_UNCLOSED
    assert think_problem("<think>\n</think>Hello", "", False) is Sign.THINK_EMPTY
    assert think_problem("Hello", "", True) is Sign.THINK_EMPTY  # thinking asked, none came
    assert think_problem("Hello", "I thought.", True) is None
    assert think_problem("Hello", "", False) is None


def test_an_announced_call_never_made() -> None:
    assert announced_without_call("Let me check the run progress.", made_call=False) is not None
    assert announced_without_call("I'll read the config file now.", made_call=False) is not None
    assert announced_without_call("Let me check the run progress.", made_call=True) is None
    assert announced_without_call("The build passed.", made_call=False) is None


def test_repeated_lines_count_outside_code_blocks() -> None:
    loop = "Let me check the logs.\n" * 4
    assert repeated_line(loop) == ("Let me check the logs.", 4)
    assert repeated_line("Check the run. Check the run. Check the run.") is not None
    code = "```\n" + "    return None\n" * 5 + "```\nDone."
    assert repeated_line(code) is None
    assert repeated_line("}\n}\n}\n}") is None  # short lines are no loop


def test_signs_of_one_reply_and_the_two_families() -> None:
    leak = Reply(content=DSML_CALL, tools_offered=True)
    assert signs_of(leak) == {Sign.DSML_MARKUP}
    loop = Reply(content="Let me check the file.\n" * 3, tools_offered=True)
    assert signs_of(loop) == {Sign.ANNOUNCED_NO_CALL, Sign.REPEATED_LINES}
    clean = Reply(content="Done.", reasoning="I read it.", thinking_requested=True)
    assert signs_of(clean) == frozenset()
    assert LEAKS.isdisjoint(LOOPS)
    assert set(Sign) == LEAKS | LOOPS


def test_thinking_asked_reads_the_template_kwargs() -> None:
    assert thinking_asked({"chat_template_kwargs": {"thinking": True}})
    assert thinking_asked({"chat_template_kwargs": {"enable_thinking": True}})
    assert not thinking_asked({"chat_template_kwargs": {"thinking": False}})
    assert not thinking_asked({})


def test_the_canaries_judge_with_the_same_detectors() -> None:
    verdict = judge_tool_calls({"content": DSML_CALL})
    assert verdict.result.value == "fail"
    assert "raw markup" in verdict.message
    leaked = judge_reasoning({"content": "hmm</think>yes", "reasoning": "hmm"})
    assert leaked.message == reasoning_in_content("hmm</think>yes")
