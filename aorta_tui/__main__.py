from aorta_tui.cli.main import run

run()
