"""The app's screens: home, recipe editor, matrix, trace monitor, env diff, policy, help."""
