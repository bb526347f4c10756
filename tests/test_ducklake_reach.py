"""A lake user reaches the lake's tables and nothing of its catalog's database (issue 36).

DuckLake attaches its catalog's database as ``__ducklake_metadata_<lake>``:
through it any user, read-only ones too, read every table the catalog role
reaches in that PostgreSQL database, another application's table there and
``pg_shadow``'s password hashes. SQL built at run time (``query('...' || '...')``)
hid the name from any check of the statement's text.
"""

from __future__ import annotations

import adbc_driver_flightsql.dbapi as dbapi
import pytest

import gateway
from gateway.errors import GatewayError
from gateway.statement import Principal
from tests.flight_support import serving
from tests.lakes import pg_lake

pytestmark = pytest.mark.postgres

REACHING = [
    "SELECT * FROM __ducklake_metadata_lake.public.other_app",
    "SELECT passwd FROM __ducklake_metadata_lake.pg_catalog.pg_shadow",
    'SELECT * FROM "__DuckLake_Metadata_lake".public.other_app',
    "SELECT * FROM query('SELECT * FROM __duck' || 'lake_metadata_lake.public.other_app')",
    "SELECT * FROM query_table('__ducklake_metadata_lake.public.other_app')",
    "SET search_path = '__ducklake_metadata_lake.public'",
]


@pytest.fixture(scope="module")
def lake(postgres, tmp_path_factory):
    section = pg_lake(postgres, tmp_path_factory.mktemp("reach"))
    dbname = section["catalog"].split("dbname=")[1].split()[0]
    postgres.psql("CREATE TABLE other_app (secret text); "
                  "INSERT INTO other_app VALUES ('another application''s secret')", dbname=dbname)
    with gateway.connect({"engines": {"lake": section}}) as gw:
        gw.execute("CREATE TABLE mine AS SELECT 1 AS a", engine="lake").to_arrow()
    return section


@pytest.mark.parametrize("read_only", [True, False])
@pytest.mark.parametrize("sql", REACHING)
def test_nothing_of_the_catalog_database_is_reachable(lake, sql, read_only):
    user = Principal("eve", read_only=read_only, shared=True)
    with gateway.connect({"engines": {"lake": lake}}) as gw:
        with pytest.raises(GatewayError) as refused:
            gw.execute(sql, engine="lake", principal=user).to_arrow()
        assert refused.value.kind == "permission"
        assert "secret" not in str(refused.value)
        # the lake's own tables and its history stay readable
        assert gw.execute("SELECT a FROM mine", engine="lake",
                          principal=user).to_arrow().to_pylist() == [{"a": 1}]
        history = gw.execute("SELECT count(*) AS n FROM ducklake_snapshots('lake')",
                             engine="lake", principal=user).to_arrow()
        assert history.column(0)[0].as_py() >= 1


def test_the_process_own_user_still_reads_the_catalog(lake):
    """The check is for users who share the service; the process's own user (the CLI,
    an administrator's script) still inspects its lake's catalog."""
    with gateway.connect({"engines": {"lake": lake}}) as gw:
        answer = gw.execute("SELECT count(*) AS n FROM __ducklake_metadata_lake.public."
                            "ducklake_snapshot", engine="lake").to_arrow()
        assert answer.column(0)[0].as_py() >= 1


def test_over_the_service_pg_shadow_is_refused(lake):
    with serving({"engines": {"lake": lake}}) as server, \
            dbapi.connect(server.location, autocommit=True) as conn, conn.cursor() as cur:
        with pytest.raises(dbapi.Error, match="catalog database"):
            cur.execute("SELECT passwd FROM __ducklake_metadata_lake.pg_catalog.pg_shadow")
        cur.execute("SELECT a FROM mine")
        assert cur.fetchall() == [(1,)]
