"""The standalone exporter against real MySQL 9.7 and MariaDB 11.8 sandboxes: InnoDB counters are served."""

from __future__ import annotations

import re
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("server", ["mysql-9.7", "mariadb-11.8"])
def test_exporter_serves_innodb_counters(server, server_sandbox):
    sb = server_sandbox(server)
    proc = subprocess.Popen([sys.executable, "-m", "tuner.cli", "exporter", "--sandbox", sb.name, "--listen",
                             "127.0.0.1:0"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO)
    try:
        line = proc.stdout.readline()
        url = re.search(r"(http://\S+/metrics)", line).group(1)
        text = urllib.request.urlopen(url, timeout=30).read().decode()
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    assert 'innotier_collector_success{collector="innodb"} 1.0' in text, text[:2000]
    read = re.search(rf'innotier_innodb_pages_read_total{{server="sandbox:{re.escape(sb.name)}"}} (\S+)', text)
    assert read and float(read.group(1)) > 0  # startup reads pages; a fresh server may not have written any yet
