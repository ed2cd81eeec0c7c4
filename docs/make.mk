# The documentation site (mkdocs.yml, docs/) and its tested code blocks. Included by the Makefile.
#   make docs         the site into target/site (mkdocs --strict: a broken link or anchor fails),
#                     with the API references generated from the code: rustdoc (core and
#                     lease), pdoc (the Python package's docstrings and signatures) and the
#                     JavaScript .d.ts
#   make test-docs    docs + every code block of docs/ and README.md run as written
#                     (docs/tools/snippets.py, with its self-test), the line-length rule (100
#                     characters) of README.md and docs/, user pages without issue numbers, seeds,
#                     commits or lab notes (user_pages.py), figures equal to BENCHMARKS.md's
#                     (figures.py)
#   make serve-docs   the site on http://127.0.0.1:8000/ while you edit
# mkdocs (Python, installs in seconds into .venv) rather than mdBook (`cargo install mdbook` costs
# minutes of compiling on a fresh machine); pinned.
DOCS_DEPS := mkdocs==1.6.1 pymdown-extensions==13.1.2 pdoc==16.0.0
DOCS_API := $(ROOT)/docs/api

.PHONY: setup-docs docs docs-api test-docs serve-docs

setup-docs: setup-python
	@$(PY_BIN) -c 'import importlib.metadata as m, sys; sys.exit(any(m.version(p) != v for p, v in (d.split("==") for d in sys.argv[1:])))' $(DOCS_DEPS) 2>/dev/null \
	  || $(PY_BIN) -m pip install -q $(DOCS_DEPS)

# Generated into docs/api/ (ignored by git), so that mkdocs checks the links into them too. Rustdoc
# in the lints' target directory, whose check builds of the dependencies it needs.
docs-api: setup-docs build-python build-js
	rm -rf $(DOCS_API) && mkdir -p $(DOCS_API)/rust $(DOCS_API)/python
	$(LINT_CARGO) doc -q -p clockflake -p clockflake-lease --no-deps
	cp -r $(ROOT)/target/lint/doc/. $(DOCS_API)/rust/
	$(PY_BIN) -m pdoc -o $(DOCS_API)/python clockflake clockflake.pydantic clockflake.django clockflake.otel
	$(PY_BIN) $(ROOT)/docs/tools/dts_page.py $(ROOT)/bindings-node/index.d.ts $(DOCS_API)/javascript.md

docs: docs-api
	$(PY_BIN) -m mkdocs build --strict -f $(ROOT)/mkdocs.yml
	@echo "site: $(ROOT)/target/site/index.html"

serve-docs: docs-api
	$(PY_BIN) -m mkdocs serve -f $(ROOT)/mkdocs.yml

# The id service's pages run against a clockflake-server the runner builds and starts.
test-docs: docs build-node
	$(PY_BIN) $(ROOT)/docs/tools/lines.py $(ROOT)/README.md $(ROOT)/CHANGELOG.md $(ROOT)/docs
	$(PY_BIN) $(ROOT)/docs/tools/user_pages.py
	$(PY_BIN) $(ROOT)/docs/tools/figures.py
	$(PY_BIN) $(ROOT)/docs/tools/snippets.py --self-test
	$(PY_BIN) $(ROOT)/docs/tools/snippets.py
	$(PY_BIN) $(ROOT)/docs/tools/rooms.py

TEST_TARGETS += test-docs
SETUP_TARGETS += setup-docs
