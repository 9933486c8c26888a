FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY store store
COPY collector collector
COPY cost cost
COPY alerts alerts
COPY forecast forecast
COPY dashboard dashboard
COPY reports reports
COPY worker worker
COPY infermeter infermeter
COPY migrations migrations
RUN pip install --no-cache-dir .
EXPOSE 8000
CMD ["infermeter", "up", "--host", "0.0.0.0"]
