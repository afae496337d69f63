# One image for the server, the agent and the CLI (`gpuwatch <command>`).
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY gpuwatch ./gpuwatch
COPY agent ./agent
COPY server ./server
COPY simulate ./simulate
COPY migrations ./migrations
RUN pip install --no-cache-dir . && useradd --system --home /var/lib/gpuwatch gpuwatch \
    && mkdir -p /var/lib/gpuwatch && chown gpuwatch /var/lib/gpuwatch
USER gpuwatch
ENV GPUWATCH_DATA_DIR=/var/lib/gpuwatch GPUWATCH_HOST=0.0.0.0
EXPOSE 8600
ENTRYPOINT ["gpuwatch"]
CMD ["server"]
