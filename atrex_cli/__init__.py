"""`atrex`, the portal's command-line client (docs/cli.md)."""
