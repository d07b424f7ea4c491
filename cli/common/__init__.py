"""What every command group shares: the one console, the checkout's paths, the options and
checks before any work, the options generated from the settings, help in panels, and how the
process ends."""
