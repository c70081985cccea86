"""The app tier: app-server processes that host the strategies behind HTTP (beside worker/)."""
