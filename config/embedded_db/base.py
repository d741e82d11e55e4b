"""PostgreSQL on Cairn's embedded server, which the first connection in a process starts."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import psycopg
from django.db.backends.postgresql import base as postgresql
from django.db.backends.postgresql.client import DatabaseClient as PostgresClient

from config.embedded_db.server import ensure_server, restart_if_down

# Keys of OPTIONS that describe the server rather than the connection; psycopg never sees them.
SERVER_OPTIONS = ("data_dir", "shared_buffers")


class DatabaseClient(PostgresClient):
    connection: DatabaseWrapper

    def runshell(self, parameters: Iterable[str]) -> None:
        self.connection.ensure_server()
        super().runshell(parameters)


class DatabaseWrapper(postgresql.DatabaseWrapper):
    """The stock PostgreSQL backend; HOST, PORT and USER come from the server under OPTIONS["data_dir"]."""

    client_class = DatabaseClient

    def ensure_server(self) -> None:
        """Start and configure the server (once per process) and point this connection's settings at it."""
        options = self.settings_dict["OPTIONS"]
        address = ensure_server(
            str(options["data_dir"]), shared_buffers=options["shared_buffers"], database=self.settings_dict["NAME"]
        )
        # settings_dict is settings.DATABASES' own entry: code that hands the database to a child
        # process (tests, benchmarks) reads the address from there once connected.
        self.settings_dict.update(HOST=address.host, PORT=str(address.port or ""), USER=address.user)

    def get_connection_params(self) -> dict[str, Any]:
        # Every connection passes here, including the one without a database that creates the
        # test database, so none reaches the server before it runs.
        self.ensure_server()
        params = super().get_connection_params()
        for key in SERVER_OPTIONS:
            params.pop(key, None)
        return params

    def get_new_connection(self, conn_params: dict[str, Any]) -> Any:
        try:
            return super().get_new_connection(conn_params)
        except psycopg.OperationalError:
            # The server may have died under us (kill -9, OOM): start it again and connect once more.
            if not restart_if_down(str(self.settings_dict["OPTIONS"]["data_dir"])):
                raise
            return super().get_new_connection(self.get_connection_params())
