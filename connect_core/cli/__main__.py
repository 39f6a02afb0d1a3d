from connect_core.cli import main

main()
