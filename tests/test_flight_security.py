"""The service's protection: loopback by default, logins, tokens, TLS, engine lists, read-only.

The certificate is made by the test (cryptography), for localhost.
"""

from __future__ import annotations

import datetime
import hashlib
import ipaddress
import logging

import adbc_driver_flightsql.dbapi as dbapi
import pyarrow.flight as flight
import pytest

import gateway
from gateway.errors import ConfigError
from gateway.flight import protobuf as M
from gateway.flight.serve_config import ServeSettings, hash_password
from tests.conftest import run_arrowgate
from tests.flight_support import CONFIG, serving

TOKEN = "bob-static-token"


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "localhost")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
            .public_key(key.public_key()).serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([
                x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                critical=False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(key, hashes.SHA256()))
    folder = tmp_path_factory.mktemp("tls")
    (folder / "server.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (folder / "server.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    return folder


@pytest.fixture(scope="module")
def secured(tls_files):
    config = {**CONFIG, "serve": {
        "tls_cert": str(tls_files / "server.crt"), "tls_key": str(tls_files / "server.key"),
        "users": {
            "alice": {"password_hash": hash_password("alice-secret"), "engines": ["duck"]},
            "bob": {"token_sha256": [hashlib.sha256(TOKEN.encode()).hexdigest()],
                    "read_only": True},
        }}}
    with serving(config) as server:
        yield server


@pytest.fixture
def root_certs(tls_files):
    return (tls_files / "server.crt").read_text()


def adbc(server, root_certs, **kwargs):
    return dbapi.connect(server.location, autocommit=True, db_kwargs={
        "adbc.flight.sql.client_option.tls_root_certs": root_certs, **kwargs})


def test_login_with_username_and_password_over_tls(secured, root_certs):
    assert secured.location.startswith("grpc+tls://")
    with adbc(secured, root_certs, username="alice", password="alice-secret") as conn, \
            conn.cursor() as cur:
        cur.execute("SELECT count(*) FROM trips")
        assert cur.fetchone()[0] > 0


def test_login_with_a_static_token_over_tls(secured, root_certs):
    with adbc(secured, root_certs, **{
            "adbc.flight.sql.authorization_header": f"Bearer {TOKEN}"}) as conn, \
            conn.cursor() as cur:
        cur.execute("SELECT 1")
        assert cur.fetchall() == [(1,)]


def client(server, root_certs):
    return flight.connect(server.location, tls_root_certs=root_certs)


def test_wrong_password_is_unauthenticated(secured, root_certs):
    with client(secured, root_certs) as c:
        with pytest.raises(flight.FlightUnauthenticatedError, match="wrong username or password"):
            c.authenticate_basic_token("alice", "guess")
        header = c.authenticate_basic_token("alice", "alice-secret")
        options = flight.FlightCallOptions(headers=[header])
        assert [a.type for a in c.list_actions(options)]


def test_no_credentials_is_unauthenticated(secured, root_certs):
    with client(secured, root_certs) as c, \
            pytest.raises(flight.FlightUnauthenticatedError, match="needs a login"):
        list(c.list_actions())


def test_unknown_token_is_unauthenticated(secured, root_certs):
    options = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer forged")])
    with client(secured, root_certs) as c, \
            pytest.raises(flight.FlightUnauthenticatedError, match="unknown or has expired"):
        list(c.list_actions(options))


def alice(c):
    return flight.FlightCallOptions(headers=[c.authenticate_basic_token("alice", "alice-secret")])


def test_a_user_sees_only_the_engines_they_may_use(secured, root_certs):
    with client(secured, root_certs) as c:
        options = alice(c)
        descriptor = flight.FlightDescriptor.for_command(M.pack(M.CommandGetCatalogs()))
        info = c.get_flight_info(descriptor, options)
        catalogs = c.do_get(info.endpoints[0].ticket, options).read_all()
        assert catalogs.column("catalog_name").to_pylist() == ["duck"]


def test_choosing_a_forbidden_engine_is_refused(secured, root_certs):
    request = M.SetSessionOptionsRequest()
    request.session_options["engine"].string_value = "other"
    with client(secured, root_certs) as c:
        (answer,) = c.do_action(flight.Action("SetSessionOptions", request.SerializeToString()),
                                alice(c))
    errors = M.SetSessionOptionsResult.FromString(answer.body.to_pybytes()).errors
    assert errors["engine"].value == M.SetSessionOptionsResult.INVALID_VALUE
    with adbc(secured, root_certs, username="alice", password="alice-secret") as conn, \
            pytest.raises(dbapi.Error):
        conn.adbc_connection.set_options(**{"adbc.flight.sql.session.option.engine": "other"})


def test_read_only_user_may_not_write(secured, root_certs):
    options = flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])
    command = M.pack(M.CommandStatementQuery(query="CREATE TABLE nope AS SELECT 1"))
    with client(secured, root_certs) as c:
        with pytest.raises(flight.FlightUnauthorizedError, match="read-only"):
            c.get_flight_info(flight.FlightDescriptor.for_command(command), options)
        info = c.get_flight_info(flight.FlightDescriptor.for_command(
            M.pack(M.CommandStatementQuery(query="SELECT 2 AS two"))), options)
        assert c.do_get(info.endpoints[0].ticket, options).read_all().to_pylist() == [{"two": 2}]


def test_secrets_never_reach_the_log(secured, root_certs, caplog):
    with caplog.at_level(logging.DEBUG), client(secured, root_certs) as c:
        header = c.authenticate_basic_token("alice", "alice-secret")
        options = flight.FlightCallOptions(headers=[header])
        info = c.get_flight_info(flight.FlightDescriptor.for_command(
            M.pack(M.CommandStatementQuery(query="SELECT 'sensitive literal' AS x"))), options)
        c.do_get(info.endpoints[0].ticket, options).read_all()
    text = caplog.text
    issued = header[1].decode().split(" ", 1)[1]
    assert '"user": "alice"' in text
    for secret in ("alice-secret", issued, TOKEN, "sensitive literal"):
        assert secret not in text


def test_non_loopback_address_needs_users_and_tls():
    with gateway.connect(CONFIG) as gw:
        with pytest.raises(ConfigError, match="without users and TLS"):
            ServeSettings.from_config(gw.config, host="0.0.0.0").check_exposure()
        ServeSettings.from_config(gw.config, host="0.0.0.0", insecure=True).check_exposure()
        ServeSettings.from_config(gw.config, host="127.0.0.1").check_exposure()


def test_serve_command_refuses_an_exposed_address(tmp_path):
    done = run_arrowgate("serve", "--host", "0.0.0.0", "--port", "0", cwd=tmp_path)
    assert done.returncode == 2
    assert "refusing to listen on 0.0.0.0" in done.stderr


def test_hash_password_command_makes_a_hash_that_checks(tmp_path):
    done = run_arrowgate("serve", "--hash-password", input="s3cret\n", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    config = {**CONFIG, "serve": {"users": {"u": {"password_hash": line}}}}
    with gateway.connect(config) as gw:
        user = ServeSettings.from_config(gw.config).users["u"]
    assert user.check_password("s3cret") and not user.check_password("s3cre")


@pytest.mark.parametrize(("serve", "message"), [
    ({"colour": "blue"}, "serve.colour: unknown key"),
    ({"users": {"u": {"engines": ["duck"]}}}, "has no password and no token"),
    ({"users": {"u": {"token_env": "T", "engines": ["nope"]}}}, "names no declared engine"),
    ({"users": {"u": {"password_hash": "plain"}}}, "is not a scrypt hash"),
    ({"tls_cert": "missing.crt"}, "TLS needs both"),
    ({"max_queries": 0}, "must be a positive integer"),
])
def test_serve_section_mistakes_are_configuration_errors(serve, message):
    with gateway.connect({**CONFIG, "serve": serve}) as gw, pytest.raises(ConfigError, match=message):
        ServeSettings.from_config(gw.config)


def test_password_from_the_environment(monkeypatch):
    monkeypatch.setenv("CAROL_PASSWORD", "from-env")
    config = {**CONFIG, "serve": {"users": {"carol": {"password_env": "CAROL_PASSWORD"}}}}
    with serving(config) as server, flight.connect(server.location) as c:
        with pytest.raises(flight.FlightUnauthenticatedError):
            c.authenticate_basic_token("carol", "wrong")
        c.authenticate_basic_token("carol", "from-env")


def test_a_user_without_engines_is_refused_every_statement(monkeypatch):
    monkeypatch.setenv("NOBODY_TOKEN", "n0body")
    config = {**CONFIG, "serve": {"users": {"nobody": {"token_env": "NOBODY_TOKEN",
                                                       "engines": []}}}}
    options = flight.FlightCallOptions(headers=[(b"authorization", b"Bearer n0body")])
    command = M.pack(M.CommandStatementQuery(query="SELECT 1"))
    with serving(config) as server, flight.connect(server.location) as c, \
            pytest.raises(flight.FlightUnauthorizedError, match="allowed: none"):
        c.get_flight_info(flight.FlightDescriptor.for_command(command), options)
