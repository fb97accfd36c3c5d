"""The app's screens: home, recipe editor, matrix, queue monitor, env diff, policy, help."""
