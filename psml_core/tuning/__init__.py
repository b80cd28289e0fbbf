"""Operating points chosen by a small tuning sweep, recorded per tier: chosen, not inherited.

* :mod:`.rule`: the selection rule, fixed in advance (pure);
* :mod:`.targets`: what a tier tunes, under which scenario, and each target's fingerprint;
* :mod:`.record`: the record file ``config/operating_points/<tier>.yaml`` and how a tier's runs
  get their points from it;
* :mod:`.sweep`: the candidates' runs and the choice (engine level: it trains);
* :mod:`.command`: ``psml tune``.

The package imports nothing here, so that the workflow (which reads records while it parses)
does not import the engine.
"""
