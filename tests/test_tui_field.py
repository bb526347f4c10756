"""What a first hour in the console met (issue 38), through the pilot: the configuration's
[shadow] reference, an engine shadowing itself."""

from __future__ import annotations

import pytest

from tests.tui_support import divergent_config, make_app

pytestmark = pytest.mark.asyncio


@pytest.fixture(autouse=True)
def _state_home(tmp_path, monkeypatch):
    monkeypatch.setenv("ARROWGATE_HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)


async def test_the_configurations_shadow_reference_is_the_tabs():
    config = divergent_config() | {"shadow": {"reference": "old"}}
    app = make_app(config)
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert app.active_tab.picker.reference == "old"
    # --engine and --reference still win
    app = make_app(config, engine="old", reference="new")
    async with app.run_test(size=(140, 40)) as pilot:
        await pilot.pause()
        assert app.active_tab.picker.reference == "new"


async def test_an_engine_cannot_shadow_itself():
    app = make_app(divergent_config(), reference="old")
    async with app.run_test(size=(140, 40)) as pilot:
        picker = app.active_tab.picker
        picker.pick(engine="old")  # the reference picked as the engine
        await pilot.pause()
        await pilot.pause()
        assert picker.engine == "old" and picker.reference is None
        picker.pick(reference="old")  # the engine picked as the reference
        await pilot.pause()
        await pilot.pause()
        assert picker.reference is None
        picker.pick(reference="new")
        await pilot.pause()
        assert picker.reference == "new"
