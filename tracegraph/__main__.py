from tracegraph.cli import main

main()
