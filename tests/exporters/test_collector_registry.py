"""The collector registry is data: each collector class declares its name, needs and oldest server."""

from __future__ import annotations

import pytest

from exporters.collectors import COLLECTOR_CLASSES, COLLECTORS, Available, build_sources
from exporters.collectors.base import SourceCollector
from tuner.core.errors import UsageError
from tuner.core.measure import Measurement
from tuner.core.server import ConnectionSpec
from exporters.state import RunState


def test_every_collector_declares_name_needs_and_min_version():
    assert tuple(COLLECTORS) == tuple(cls.name for cls in COLLECTOR_CLASSES)
    for cls in COLLECTOR_CLASSES:
        assert issubclass(cls, SourceCollector)
        assert cls.name and cls.help
        assert cls.needs and all(hasattr(Available(), need) for need in cls.needs), cls
        reads_server = "connection" in cls.needs
        assert (cls.min_version is not None) == reads_server, cls
        if reads_server:
            assert set(cls.min_version) == {"mariadb", "mysql"}


def _names(sources):
    return [s.name for s in sources]


def test_built_from_what_is_available():
    m, state = Measurement(), RunState({"tier": "zram"})
    assert _names(build_sources(measurement=m)) == ["tpcc"]
    assert _names(build_sources(state=state)) == ["run_info", "sweep"]
    spec = ConnectionSpec(socket="/nonexistent/innotier.sock")  # no connection is opened at build time
    assert _names(build_sources(spec=spec)) == ["innodb"]
    both = build_sources(measurement=m, state=state, spec=spec.with_database("tpcc"))
    assert _names(both) == ["tpcc", "run_info", "sweep", "innodb", "tpcc_schema"]
    assert _names(build_sources(measurement=m, state=state, disabled=("sweep", "tpcc"))) == ["run_info"]


def test_unknown_disabled_collector_is_refused():
    with pytest.raises(UsageError, match="unknown collector"):
        build_sources(disabled=("nope",))


def test_every_registered_collector_can_be_built():
    available = Available(measurement=Measurement(), connection=object(), database="tpcc",
                          run_state=RunState(), driver_id="0")
    for cls in COLLECTOR_CLASSES:
        assert isinstance(cls.from_available(available), cls)


def test_cli_refuses_an_unknown_collector_with_the_registrys_names(cli):
    p = cli("exporter", "--no-collector", "inodb", "--socket", "/nonexistent/mysqld.sock")
    assert p.returncode == UsageError.exit_code and p.stderr.count("\n") == 1, p.stderr
    assert "unknown collector(s) inodb" in p.stderr and ", ".join(COLLECTORS) in p.stderr
