"""Apps on a person's knowledge (docs/apps.md): registrations, installations with their own
credential, permission strings switched on one by one, collections mapped onto knowledge bases
and folders, documents, search, changes, quotas and uninstall.

What an installation reaches is always the intersection of its switched-on grants
(``openkb.apps.reach``) and the user's own permissions at the moment of the call (the
``access_*`` functions of ``openkb.permissions``, called with the user's principal).
"""
