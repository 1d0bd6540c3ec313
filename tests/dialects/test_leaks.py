"""Call markup that leaks in shapes the family's own parser misses, read by every dialect whole
and streamed alike; string values kept byte for byte by repair; and the prose beside each shape
that must stay prose. The real replies are in the corpus (``tests/fixtures/corpus``); here are
the variations around them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolshim.dialects import available_dialects, get_dialect
from toolshim.types import ToolSpec

from .conftest import Outcome, streamed, whole

DIALECTS = available_dialects()
EXEC = ToolSpec(
    "exec_command",
    "Runs a command in a PTY",
    {
        "type": "object",
        "properties": {"cmd": {"type": "string"}, "workdir": {"type": "string"}},
        "required": ["cmd"],
    },
)
WRITE = ToolSpec(
    "write_file",
    "Writes a file",
    {
        "type": "object",
        "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
        "required": ["path", "content"],
    },
)
SEARCH = ToolSpec(
    "web_search",
    "Searches the web",
    {
        "type": "object",
        "properties": {"query": {"type": "string"}, "filter_year": {"type": "integer"}},
        "required": ["query"],
    },
)
TOOLS = [EXEC, WRITE, SEARCH]


def read(dialect: str, text: str, tools: list[ToolSpec] = TOOLS) -> Outcome:
    """The parse of ``text``, after checking that it streams the same, character by character
    and in two pieces at every cut."""
    d = get_dialect(dialect)
    expected = whole(d, text, tools)
    assert streamed(d.parser(tools), list(text)) == expected
    for cut in range(len(text) + 1):
        assert streamed(d.parser(tools), [text[:cut], text[cut:]]) == expected, cut
    return expected


def calls(outcome: Outcome) -> list[tuple[str, Any]]:
    assert all(problem is None for _, _, problem in outcome[1]), outcome
    return [(name, arguments) for name, arguments, _ in outcome[1]]


# -- DeepSeek DSML: invokes elided with "..." -----------------------------------------------------


def dsml(bar: str, *invokes: str, elision: str = "...") -> str:
    d = f"{bar}DSML{bar}"
    return f"<{d}tool_calls>\n" + "".join(invokes) + f"{elision}\n</{d}tool_calls>"


def invoke(bar: str, cmd: str, *, closed: bool = True) -> str:
    d = f"{bar}DSML{bar}"
    head = f'<{d}invoke name="exec_command">\n<{d}parameter name="cmd" string="true">'
    return head + f"{cmd}</{d}parameter>\n" + (f"</{d}invoke>\n" if closed else "")


@pytest.mark.parametrize("bar", ["｜", "｜｜", "|", "‖"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_every_complete_invoke_before_an_elision_is_a_call(bar: str, dialect: str) -> None:
    text = dsml(bar, invoke(bar, "ls -la"), invoke(bar, "git status"))
    assert calls(read(dialect, text)) == [
        ("exec_command", {"cmd": "ls -la"}),
        ("exec_command", {"cmd": "git status"}),
    ]


@pytest.mark.parametrize("dialect", DIALECTS)
def test_an_invoke_left_open_ends_where_the_next_one_begins(dialect: str) -> None:
    # The first invoke's closing tag elided: it must not swallow the second call.
    text = dsml("｜", invoke("｜", "ls -la", closed=False), "...\n", invoke("｜", "git status"))
    assert calls(read(dialect, text)) == [
        ("exec_command", {"cmd": "ls -la"}),
        ("exec_command", {"cmd": "git status"}),
    ]
    last_open = dsml("｜", invoke("｜", "ls"), invoke("｜", "pwd", closed=False)) + "\nDone."
    outcome = read(dialect, last_open)
    assert calls(outcome) == [("exec_command", {"cmd": "ls"}), ("exec_command", {"cmd": "pwd"})]
    assert outcome[0].endswith("Done.")


@pytest.mark.parametrize("dialect", DIALECTS)
def test_dots_inside_a_dsml_value_are_the_value(dialect: str) -> None:
    cmd = 'echo "..."\n...\nprintf "%s" ... # more ...'
    assert calls(read(dialect, dsml("｜", invoke("｜", cmd), elision=""))) == [
        ("exec_command", {"cmd": cmd})
    ]


# -- gpt-oss / harmony: stray tokens between the recipient and the arguments ----------------------


@pytest.mark.parametrize(
    "junk",
    [
        " code  全民彩票天天送钱",
        "  ฅ天 json",
        " 鲁夜夜啪o՞ւjson  天天买彩票 ",
        " մեկնաբանություն  北京赛车开奖_json\n",
        " commentary json\n",
        " commentaries .json: ",
        " <|constrain|>json<|message|>",
        " ,超碰 json",
        "全民彩票 json",
        " <|channel|>commentary <|constrain|>json<|message|>",
    ],
)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_harmony_call_is_read_through_stray_tokens_and_the_prose_after_kept(
    junk: str, dialect: str
) -> None:
    text = (
        "Let me look first. to=functions.exec_command"
        + junk
        + '{"cmd": "ls -la", "workdir": "/srv"}\nThen I will read the README.'
    )
    outcome = read(dialect, text)
    assert calls(outcome) == [("exec_command", {"cmd": "ls -la", "workdir": "/srv"})]
    assert outcome[0] == "Let me look first. \nThen I will read the README."


@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_harmony_recipient_glued_to_stray_tokens_before_it_is_read(dialect: str) -> None:
    text = '好的。天天中彩票to=functions.exec_command json{"cmd": "ls"}<|call|>然后'
    outcome = read(dialect, text)
    assert calls(outcome) == [("exec_command", {"cmd": "ls"})]
    assert outcome[0] == "好的。天天中彩票然后"


@pytest.mark.parametrize(
    "text",
    [
        'The recipient to=functions.exec_command is followed by {"cmd": "ls"} in the header.',
        'Write to=functions.exec_command then json then the args, e.g. {"cmd": "ls"}.',
        "Harmony names the tool as to=functions.exec_command and stops.",
        'Its header, to=functions.exec_command comments {"cmd": "ls"}, is not a call.',
    ],
)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_recipient_named_in_a_sentence_before_braces_is_prose(text: str, dialect: str) -> None:
    assert read(dialect, text) == (text, [], False)


# -- Llama's function tag without its opener: NAME{json}</function> -------------------------------


@pytest.mark.parametrize("glue", ["", " ", ">", "=", " = ", "\t>"])
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_name_glued_to_its_arguments_and_closed_by_the_function_tag_is_a_call(
    glue: str, dialect: str
) -> None:
    # What <function=NAME>{…}</function> leaves when its opener (or part of it) is lost.
    text = (
        f'Searching now. web_search{glue}{{"query": "SPFMV 2016", "filter_year": 2016}}'
        " </function>\nOK"
    )
    outcome = read(dialect, text)
    assert calls(outcome) == [("web_search", {"query": "SPFMV 2016", "filter_year": 2016})]
    assert outcome[0] == "Searching now. \nOK"


@pytest.mark.parametrize(
    "text",
    [
        'You can call web_search{"query": "llamas"} whenever you need fresh results.',
        'Its signature is web_search{"query": string, "filter_year": int}.',
        'Then x = web_search={"query": "a"} and y = web_search>{"query": "b"} follow.',
        "Llama 3.1 closes a call with </function> and then <|eom_id|> ends the turn.",
        "A stray </function> here, and </FUNCTION> there, are only text.",
        'Groq rejected `web_search{"query": "x"}</function>` as a failed generation.',
    ],
)
@pytest.mark.parametrize("dialect", DIALECTS)
def test_a_name_next_to_braces_or_a_quoted_closing_tag_is_prose(text: str, dialect: str) -> None:
    outcome = read(dialect, text)
    assert outcome[1] == []
    assert outcome[0] == text.replace("<|eom_id|>", "")  # a special token is dropped as ever


def test_a_closing_function_tag_right_after_a_call_is_dropped() -> None:
    text = '<function=web_search>{"query": "x"}</function></function> Done.'
    assert read("json", text) == (" Done.", [("web_search", {"query": "x"}, None)], False)


# -- string values byte for byte ------------------------------------------------------------------

# hermes-agent#29597 and #36271: write_file arguments with unescaped quotes in their content.
UNESCAPED = [
    (r'{"path": "foo.py", "content": "def f():\n    """Docstring."""\n    pass', "}"),
    (r'{"path": "a.py", "content": "env.get("KEY", "default")', "}"),
]
WRAPPERS = [
    '{{"name": "write_file", "arguments": {args}}}',
    '<tool_call>\n{{"name": "write_file", "arguments": {args}}}\n</tool_call>',
    "<function=write_file>{args}</function>",
    "write_file{args}</function>",
    "to=functions.write_file json{args}",
    "[TOOL_CALLS]write_file[ARGS]{args}",
    '```json\n{{"tool_calls": [{{"name": "write_file", "arguments": {args}}}]}}\n```',
]


@pytest.mark.parametrize("tail", ["", r"\n", r"\n\n\n", r"\n  \n\t\n", r" \r\n"])
@pytest.mark.parametrize("wrapper", WRAPPERS)
@pytest.mark.parametrize("args", UNESCAPED, ids=["docstring", "env-get"])
@pytest.mark.parametrize("dialect", ["json", "hermes", "pythonic"])
def test_a_content_with_unescaped_quotes_keeps_its_trailing_whitespace(
    args: tuple[str, str], wrapper: str, tail: str, dialect: str
) -> None:
    head, close = args
    text = wrapper.format(args=head + tail + '"' + close)
    content = head.split('"content": "', 1)[1] + tail
    expected = content.replace(r"\n", "\n").replace(r"\t", "\t").replace(r"\r", "\r")
    assert [a["content"] for _, a in calls(read(dialect, text, [WRITE]))] == [expected]


_PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
contents = st.text(st.characters(exclude_categories=["Cs"]), max_size=40).map(
    lambda s: s + "\n\n\n"
) | st.text(st.sampled_from(" \t\r\nab\"'{}\\é"), max_size=24)


@_PROPERTY
@given(contents, st.sampled_from(["unquoted-keys", "single-quoted-path", "missing-comma"]))
def test_repair_never_trims_or_respaces_a_string(content: str, damage: str) -> None:
    """Arguments that need json-repair (the keys unquoted, a value in single quotes, a comma
    missing) still give every string argument back exactly as written."""
    value = json.dumps(content)
    args = {
        "unquoted-keys": f'{{path: "notes.md", content: {value}}}',
        "single-quoted-path": f'{{"path": \'notes.md\', "content": {value},}}',
        "missing-comma": f'{{"path": "notes.md" "content": {value}}}',
    }[damage]
    for text in (
        f'{{"name": "write_file", "arguments": {args}}}',
        f"<function=write_file>{args}</function>",
    ):
        outcome = whole(get_dialect("json"), text, [WRITE])
        assert [(n, a) for n, a, _ in outcome[1]] == [
            ("write_file", {"path": "notes.md", "content": content})
        ], text


D = "｜DSML｜"
MARKUP = {
    "dsml": f'<{D}tool_calls>\n<{D}invoke name="write_file">\n<{D}parameter name="path" '
    f'string="true">a.py</{D}parameter>\n<{D}parameter name="content" string="true">'
    "{content}" + f"</{D}parameter>\n</{D}invoke>\n</{D}tool_calls>",
    "invoke": '<function_calls><invoke name="write_file"><parameter name="path">a.py</parameter>'
    '<parameter name="content">{content}</parameter></invoke></function_calls>',
    "glm": "<tool_call>write_file<arg_key>path</arg_key><arg_value>a.py</arg_value>"
    "<arg_key>content</arg_key><arg_value>{content}</arg_value></tool_call>",
    # Qwen3-Coder's template pads each value with a newline at each end.
    "qwen3-coder": "<tool_call>\n<function=write_file>\n<parameter=path>\na.py\n</parameter>\n"
    "<parameter=content>\n{content}\n</parameter>\n</function>\n</tool_call>",
}


@pytest.mark.parametrize(
    "content", ["print(1)\n\n\n", "  indented\n", "x \t", "line\r\n", "a\n\nb"]
)
@pytest.mark.parametrize("markup", list(MARKUP))
@pytest.mark.parametrize("dialect", ["json", "hermes", "pythonic"])
def test_a_string_in_markup_keeps_its_own_whitespace(
    markup: str, content: str, dialect: str
) -> None:
    text = MARKUP[markup].replace("{content}", content)
    assert calls(read(dialect, text, [WRITE])) == [
        ("write_file", {"path": "a.py", "content": content})
    ]
