"""Runs os-ken applications as its own manager would: python run_osken.py
PORT APP.py... listens for switches on 127.0.0.1:PORT. (The os-ken
package on PyPI ships no `osken-manager` script.)"""

import sys

from os_ken.lib import hub

hub.patch(thread=False)

from os_ken import cfg, log  # noqa: E402
from os_ken.base import app_manager  # noqa: E402
import os_ken.controller.controller  # noqa: E402,F401  (registers ofp-* options)


def main():
    port, apps = sys.argv[1], sys.argv[2:]
    cfg.CONF(args=["--ofp-tcp-listen-port", port, "--ofp-listen-host", "127.0.0.1"],
             project="os_ken")
    log.init_log()
    manager = app_manager.AppManager.get_instance()
    manager.load_apps(apps)
    services = manager.instantiate_apps(**manager.create_contexts())
    hub.joinall(services)


if __name__ == "__main__":
    main()
