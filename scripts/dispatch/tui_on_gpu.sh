#!/usr/bin/env bash
# The TUI trace monitor on the GPU box, driven under tmux as a user would: screen 4, target
# `python3 scripts/dispatch/bursts.py`, start; the screen is captured while the program runs.
# Usage: bash scripts/dispatch/tui_on_gpu.sh OUTDIR [cols rows]
set -u
out=$1; cols=${2:-160}; rows=${3:-48}; sock=aorta-gpu-$$
tmux -L "$sock" new-session -d -s mon -x "$cols" -y "$rows" "cd $PWD && TERM=xterm-256color python3 -m aorta_tui; echo exit=\$?; sleep 60"
tmux -L "$sock" set-option -t mon window-size manual 2>/dev/null
tmux -L "$sock" resize-window -t mon -x "$cols" -y "$rows" 2>/dev/null
sleep 6; tmux -L "$sock" capture-pane -p -t mon > "$out/tui-$cols-0.txt"
tmux -L "$sock" send-keys -t mon 4; sleep 2
tmux -L "$sock" send-keys -t mon t; sleep 0.5
tmux -L "$sock" send-keys -t mon -l "python3 scripts/dispatch/bursts.py --seconds 25"
sleep 0.5; tmux -L "$sock" send-keys -t mon Escape; sleep 0.7; tmux -L "$sock" send-keys -t mon s
for i in 1 2 3; do sleep 6; tmux -L "$sock" capture-pane -p -t mon > "$out/tui-$cols-$i.txt"; done
tmux -L "$sock" send-keys -t mon m; sleep 2; tmux -L "$sock" capture-pane -p -t mon > "$out/tui-$cols-m.txt"
sleep 12; tmux -L "$sock" send-keys -t mon C-q; sleep 2; tmux -L "$sock" kill-server 2>/dev/null
