"""The native Slack adapter (Socket Mode or HTTP events, on slack-bolt); see docs/platforms/slack.md."""
