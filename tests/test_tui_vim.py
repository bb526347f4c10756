"""Vim-style editing in the console's editor, through Textual's pilot."""

from __future__ import annotations

import pytest

from gateway.errors import ConfigError
from tests.tui_support import make_app, quickstart_config, settle

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


def vim_config() -> dict:
    return {**quickstart_config(), "tui": {"vim": True}}


async def start(pilot, text: str):  # type: ignore[no-untyped-def]
    """The active tab with ``text`` in its editor, cursor at the start, in normal mode."""
    tab = pilot.app.active_tab
    tab.editor.text = text
    tab.editor.focus()
    await pilot.pause()
    assert tab.editor.area.mode == "normal"
    return tab


def cursor(tab) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    return tab.editor.area.cursor_location


async def test_motions_h_j_k_l_w_b_e_0_dollar_gg_G():
    app = make_app(vim_config())
    async with app.run_test(size=(120, 30)) as pilot:
        tab = await start(pilot, "select a_b, c\nfrom t\n  where x = 1")
        await pilot.press("l", "l")
        assert cursor(tab) == (0, 2)
        await pilot.press("h")
        assert cursor(tab) == (0, 1)
        await pilot.press("w")
        assert cursor(tab) == (0, 7)  # a_b
        await pilot.press("e")
        assert cursor(tab) == (0, 9)  # the b of a_b
        await pilot.press("w")
        assert cursor(tab) == (0, 10)  # the comma is a word of its own
        await pilot.press("b")
        assert cursor(tab) == (0, 7)
        await pilot.press("dollar_sign")
        assert cursor(tab) == (0, 12)  # on the last character, not past it
        await pilot.press("j")
        assert cursor(tab) == (1, 5)  # clamped to the shorter line
        await pilot.press("0")
        assert cursor(tab) == (1, 0)
        await pilot.press("j", "k")
        assert cursor(tab) == (1, 0)
        await pilot.press("G")
        assert cursor(tab) == (2, 0)
        await pilot.press("g", "g")
        assert cursor(tab) == (0, 0)
        # no motion key typed a character
        assert tab.editor.text == "select a_b, c\nfrom t\n  where x = 1"


async def test_insert_commands_i_a_I_A_o_O_and_escape():
    app = make_app(vim_config())
    async with app.run_test(size=(120, 30)) as pilot:
        tab = await start(pilot, "  b\nd")
        await pilot.press("I", "a", "escape")
        assert tab.editor.text == "  ab\nd" and cursor(tab) == (0, 2)
        assert tab.editor.area.mode == "normal"
        await pilot.press("a", "x", "escape")  # after the cursor's character
        assert tab.editor.text == "  axb\nd"
        await pilot.press("A", "c", "escape")
        assert tab.editor.text == "  axbc\nd"
        await pilot.press("0", "i", "z", "escape")
        assert tab.editor.text == "z  axbc\nd"
        await pilot.press("o", "n", "e", "w", "escape")
        assert tab.editor.text == "z  axbc\nnew\nd"
        await pilot.press("O", "u", "p", "escape")
        assert tab.editor.text == "z  axbc\nup\nnew\nd"
        assert cursor(tab) == (1, 1)


async def test_edits_x_dd_yy_p_P_u_and_ctrl_r():
    app = make_app(vim_config())
    async with app.run_test(size=(120, 30)) as pilot:
        tab = await start(pilot, "one\ntwo\nthree")
        await pilot.press("x")
        assert tab.editor.text == "ne\ntwo\nthree"
        await pilot.press("p")  # the deleted character, after the cursor
        assert tab.editor.text == "noe\ntwo\nthree"
        await pilot.press("u")
        assert tab.editor.text == "ne\ntwo\nthree"
        await pilot.press("ctrl+r")
        assert tab.editor.text == "noe\ntwo\nthree"
        await pilot.press("u", "u")
        assert tab.editor.text == "one\ntwo\nthree"
        await pilot.press("j", "d", "d")
        assert tab.editor.text == "one\nthree" and cursor(tab) == (1, 0)
        await pilot.press("p")  # a deleted line goes in below
        assert tab.editor.text == "one\nthree\ntwo" and cursor(tab) == (2, 0)
        await pilot.press("g", "g", "y", "y", "G", "P")  # a yanked line above
        assert tab.editor.text == "one\nthree\none\ntwo"
        await pilot.press("G", "d", "d")  # the last line
        assert tab.editor.text == "one\nthree\none"
        await pilot.press("u")
        assert tab.editor.text == "one\nthree\none\ntwo"


async def test_visual_selection_yanks_and_deletes():
    app = make_app(vim_config())
    async with app.run_test(size=(120, 30)) as pilot:
        tab = await start(pilot, "select 1, 2 from t")
        await pilot.press("w", "v")
        assert tab.editor.area.mode == "visual"
        assert tab.editor.selected_text == "1"  # the character under the cursor
        await pilot.press("w", "w")
        assert tab.editor.selected_text == "1, 2"
        await pilot.press("b")
        assert tab.editor.selected_text == "1,"
        await pilot.press("y")
        assert tab.editor.area.mode == "normal" and tab.editor.area.register == "1,"
        assert tab.editor.text == "select 1, 2 from t"
        await pilot.press("dollar_sign", "p")
        assert tab.editor.text == "select 1, 2 from t1,"
        await pilot.press("0", "v", "e", "d")
        assert tab.editor.text == " 1, 2 from t1,"
        await pilot.press("v", "dollar_sign", "escape")
        assert tab.editor.area.mode == "normal" and not tab.editor.selected_text


async def test_the_mode_shows_in_the_status_bar_f9_toggles_and_ctrl_enter_runs():
    app = make_app(quickstart_config())
    async with app.run_test(size=(120, 30)) as pilot:
        tab = app.active_tab
        tab.editor.text = "SELECT 41 + 1 AS n"
        tab.editor.focus()
        await pilot.pause()
        assert not tab.editor.vim and "NORMAL" not in str(tab.status.render())
        await pilot.press("f9")
        await pilot.pause()
        assert tab.editor.vim
        assert str(tab.status.render()).startswith("-- NORMAL --")
        await pilot.press("i")
        await pilot.pause()
        assert str(tab.status.render()).startswith("-- INSERT --")
        await pilot.press("escape", "v")
        await pilot.pause()
        assert str(tab.status.render()).startswith("-- VISUAL --")
        await pilot.press("escape", "ctrl+enter")  # keys vim does not use keep their meaning
        await settle(pilot, tab)
        assert tab.answer.table.to_pylist() == [{"n": 42}]
        assert str(tab.status.render()).startswith("-- NORMAL -- 1 row")
        await pilot.press("f9")
        await pilot.pause()
        assert not tab.editor.vim and not str(tab.status.render()).startswith("--")
        await pilot.press("x")  # plain editing again: x types an x
        assert tab.editor.text.startswith("x")


async def test_the_tui_section_is_checked():
    from gateway.core import Gateway
    from gateway.tui.console import ConsoleCore

    for config, vim in ((vim_config(), True), (quickstart_config(), False)):
        core = ConsoleCore(Gateway(config))
        assert core.settings.vim is vim
        core.close()
    with pytest.raises(ConfigError, match="must be"):
        ConsoleCore(Gateway({**quickstart_config(), "tui": {"vim": "yes"}}))
    with pytest.raises(ConfigError, match="unknown key"):
        ConsoleCore(Gateway({**quickstart_config(), "tui": {"emacs": True}}))


async def test_counts_repeat_motions_and_edits():
    app = make_app(vim_config())
    async with app.run_test(size=(120, 30)) as pilot:
        tab = await start(pilot, "a b c d e\ntwo\nthree\nfour\nfive")
        await pilot.press("3", "w")
        assert cursor(tab) == (0, 6)  # d
        await pilot.press("2", "j")
        assert cursor(tab) == (2, 4)  # clamped to "three"
        await pilot.press("4", "G")
        assert cursor(tab) == (3, 0)
        await pilot.press("g", "g", "3", "x")
        assert tab.editor.text.startswith(" c d e\n")
        await pilot.press("u", "j", "2", "d", "d")
        assert tab.editor.text == "a b c d e\nfour\nfive"
        await pilot.press("p")  # the two lines go in below
        assert tab.editor.text == "a b c d e\nfour\ntwo\nthree\nfive"
        await pilot.press("1", "0", "0", "G")  # past the end: the last line
        assert cursor(tab) == (4, 0)


async def test_operators_take_motions():
    app = make_app(vim_config())
    async with app.run_test(size=(120, 30)) as pilot:
        tab = await start(pilot, "select a, b from t\nwhere x\nand y")
        await pilot.press("d", "w")
        assert tab.editor.text.startswith("a, b from t\n")
        await pilot.press("P")  # dw yanked "select "
        assert tab.editor.text.startswith("select a, b from t\n")
        await pilot.press("0", "w", "c", "w", "z", "escape")  # cw changes to the word's end
        assert tab.editor.text.startswith("select z, b from t\n")
        await pilot.press("w", "w", "d", "2", "w")  # "b from "
        assert tab.editor.text.startswith("select z, t\n")
        await pilot.press("0", "y", "e", "dollar_sign", "p")
        assert tab.editor.text.startswith("select z, tselect\n")
        await pilot.press("0", "w", "D")
        assert tab.editor.text.startswith("select \n")
        await pilot.press("j", "0", "C", "w", "h", "e", "n", "escape")
        assert tab.editor.text == "select \nwhen\nand y"
        await pilot.press("g", "g", "d", "j")  # linewise: both lines
        assert tab.editor.text == "and y"
        await pilot.press("c", "c", "o", "r", "escape")
        assert tab.editor.text == "or"
        await pilot.press("y", "y", "p")
        assert tab.editor.text == "or\nor"
        await pilot.press("d", "g", "g")  # linewise up to the first line: both
        assert tab.editor.text == ""
        await pilot.press("i", "x", "escape", "d", "escape", "x")  # escape drops the d
        assert tab.editor.text == "" and tab.editor.area.mode == "normal"


async def test_a_huge_count_neither_hangs_nor_floods():
    """A count is a loop: 99999999j ran a motion a hundred million times on the event loop."""
    app = make_app(vim_config())
    async with app.run_test(size=(120, 30)) as pilot:
        tab = await start(pilot, "ab\ncd")
        await pilot.press(*"99999999", "j")
        assert cursor(tab) == (1, 0)
        await pilot.press("g", "g", "y", "l", *"99999999", "p")  # at most 9999 copies
        assert tab.editor.text.count("a") <= 10_000
        await pilot.press(*"99999999", "l")
        assert cursor(tab)[0] == 0
