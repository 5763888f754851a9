"""Running one notebook of untrusted code: the sandbox (``sandbox``) under bubblewrap (``bwrap``) or, where
namespaces are missing, as an unprivileged user (``fallback``); its limits (``limits``, ``cgroups``), the process
inside it (``runner``), what it sends back (``sandbox_events``), its scratch folders (``scratch``), and the ACL
entries that open a Python in a private home to the fallback's uids alone (``acl``: ``dfa sandbox setup``).
It never sees an answer key and never writes a gradebook.

May import: ``courses``, ``verdicts``.
"""
