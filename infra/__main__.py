from infra.cli.main import main

main(prog_name="openpod")
