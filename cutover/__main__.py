from cutover.cli import main

main()
