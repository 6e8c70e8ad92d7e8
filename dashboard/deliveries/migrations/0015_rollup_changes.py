"""A count of the writes that change rollup rows in place, for caches computed from the rollups."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('deliveries', '0014_message_index_include'),
    ]

    operations = [
        migrations.CreateModel(
            name='RollupChanges',
            fields=[
                ('id', models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name='ID')),
                ('changes', models.BigIntegerField(default=0)),
            ],
            options={
                'verbose_name_plural': 'rollup changes',
            },
        ),
    ]
