from psml_core.cli import main

raise SystemExit(main())
