from infra.cli import main

main(prog_name="openpod")
