from aorta_tui.cli.entry import run

run()
