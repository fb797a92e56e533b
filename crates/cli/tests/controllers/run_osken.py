"""Runs os-ken applications as its own manager would: python run_osken.py
PORT APP.py... listens for switches on 127.0.0.1:PORT. (The os-ken
package on PyPI ships no `osken-manager` script.) With OSKEN_TLS=KEY,CERT,CA
in the environment it listens for TLS instead, and asks switches for a
certificate signed by CA."""

import os
import sys

from os_ken.lib import hub

hub.patch(thread=False)

from os_ken import cfg, log  # noqa: E402
from os_ken.base import app_manager  # noqa: E402
import os_ken.controller.controller  # noqa: E402,F401  (registers ofp-* options)


def main():
    port, apps = sys.argv[1], sys.argv[2:]
    args = ["--ofp-listen-host", "127.0.0.1"]
    tls = os.environ.get("OSKEN_TLS")
    if tls:
        key, cert, ca = tls.split(",")
        args += ["--ofp-ssl-listen-port", port, "--ofp-tcp-listen-port", "0",
                 "--ctl-privkey", key, "--ctl-cert", cert, "--ca-certs", ca]
    else:
        args += ["--ofp-tcp-listen-port", port]
    cfg.CONF(args=args, project="os_ken")
    log.init_log()
    manager = app_manager.AppManager.get_instance()
    manager.load_apps(apps)
    services = manager.instantiate_apps(**manager.create_contexts())
    hub.joinall(services)


if __name__ == "__main__":
    main()
