"""Approvals in Slack: a Block Kit message per approval request, Approve/Reject buttons, and an
interaction endpoint whose every request is verified with Slack's request signing.

- ``SlackNotifier`` (a core ``Notifier``) posts ``chat.postMessage`` when a run starts waiting,
  and ``chat.update``s that message when the run is decided — from Slack, the inbox, the API or
  the CLI. Fire-and-forget like every notifier: Slack being down never blocks or loses a run.
- ``SlackInteractions`` serves ``POST /api/slack/interactions``. A request counts only when its
  ``X-Slack-Signature`` is the HMAC of its body under the signing secret and its timestamp is
  within five minutes (``slack_sdk.signature.SignatureVerifier``); a signature seen before is a
  replay and is refused. The Slack user must be mapped to an approver identity in the settings
  (``SIGNOFF_SLACK_USERS``); the decision then goes through ``Runtime.decide`` like every other
  surface's, with channel ``slack``. Whether it counts is the runtime's call, never Slack's.

The message shows what the inbox shows — action, proposer, why approval is needed, the input with
sensitive fields masked, expiry — with every value escaped for Slack's markup (an agent cannot
mention ``@channel`` or plant a link). Only the configured Slack API is ever called: nothing from
an interaction payload (such as its ``response_url``) is used as an address.

Only the settings are imported here: the notifier and the interactions (``messages``,
``interactions``) need ``slack-sdk``, the ``slack`` extra, and are imported when Slack is
configured.
"""

from signoff.surfaces.web.slack.config import SlackApprover, SlackConfig, SlackConfigError

__all__ = ["SlackApprover", "SlackConfig", "SlackConfigError"]
