# The recipes of docs/recipes/, each a tested example against its real framework.
#   make test-recipes   Python (examples/python: FastAPI + SQLAlchemy 2 + PostgreSQL, Django with
#                       makemigrations, Pydantic v2) and JavaScript (examples/node: Express, Fastify,
#                       node-postgres, Drizzle ORM), against a throwaway PostgreSQL; the frameworks are
#                       installed, pinned, into .venv and examples/node/node_modules
RECIPES_PY := $(ROOT)/examples/python
RECIPES_JS := $(ROOT)/examples/node
RECIPES_STAMP := $(PY_VENV)/.recipes-requirements

.PHONY: setup-recipes test-recipes

setup-recipes: setup-python setup-node
	@cmp -s $(RECIPES_PY)/requirements.txt $(RECIPES_STAMP) \
	  || ($(PY_BIN) -m pip install -q -r $(RECIPES_PY)/requirements.txt && cp $(RECIPES_PY)/requirements.txt $(RECIPES_STAMP))
	@cd $(RECIPES_JS) && if ! cmp -s package-lock.json node_modules/.installed-lock.json; then \
	  npm ci --no-audit --no-fund && cp package-lock.json node_modules/.installed-lock.json; fi

test-recipes: build-python build-node setup-recipes setup-biome
	$(PY_VENV)/bin/ruff check --config $(PY_DIR)/pyproject.toml --extend-exclude '**/migrations/**' $(RECIPES_PY)
	$(PY_VENV)/bin/ruff format --check --config $(PY_DIR)/pyproject.toml --extend-exclude '**/migrations/**' $(RECIPES_PY)
	cd $(RECIPES_JS) && $(BIOME) lint --error-on-warnings *.mjs
	export CLOCKFLAKE_PG_DIR=$$(mktemp -d /tmp/clockflake-recipes-pg.XXXXXX); \
	trap '$(ROOT)/scripts/postgres.sh stop' EXIT; \
	$(ROOT)/scripts/postgres.sh start; \
	export CLOCKFLAKE_PG_URL=$$($(ROOT)/scripts/postgres.sh url); \
	$(PY_BIN) -m pytest -q -p no:cacheprovider $(RECIPES_PY)/tests && \
	cd $(RECIPES_JS) && node --test recipes.test.mjs

TEST_TARGETS += test-recipes
SETUP_TARGETS += setup-recipes
