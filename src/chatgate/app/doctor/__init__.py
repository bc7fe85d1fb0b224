"""``chatgate doctor``: every way a gateway can fail to start or to answer, checked one by one.

Each check gives one ``Finding`` (its name, what it found, the fix on a failure). The local
checks (``local.py``: the secrets file, the config, the secrets, disk space, the database,
the state dir's lock, the sandbox, the port) are cheap; the live ones (``live.py``: each
platform's credential, the model endpoint's one-token completion) talk to the real services
and run only in ``doctor``. The gateway runs the cheap ones it does not already enforce at
its start (``start_warnings``) and logs what fails.
"""
