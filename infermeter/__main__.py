from infermeter.cli import main

raise SystemExit(main())
