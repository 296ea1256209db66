from k26ctl.cli.app import main

main()
