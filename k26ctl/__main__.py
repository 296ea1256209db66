from k26ctl.cli.app import entry

entry()
