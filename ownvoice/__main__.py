from ownvoice.cli import main

main()
